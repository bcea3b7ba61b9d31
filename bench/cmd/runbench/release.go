package main

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ReleaseSizes is what `make release` made (dist/metadata.json), and what the agent's binary
// links, by module, from its symbol table (go tool nm -size of the bench's own build, which
// is not stripped): the binary's pages are part of the agent's resident memory.
type ReleaseSizes struct {
	Version   string            `json:"version"`
	Commit    string            `json:"commit"`
	Artifacts []ReleaseArtifact `json:"artifacts"`
	Image     []ReleaseImage    `json:"image"`
	// Binaries are the release's binaries by arch, read from their tarballs.
	Binaries map[string]int64 `json:"binaries"`
	// Linked is the bench agent's symbols' sizes by module, largest first; LinkedTotal their sum.
	Linked      []LinkedShare `json:"linked,omitempty"`
	LinkedTotal int64         `json:"linked_total,omitempty"`
}

// ReleaseArtifact is one file of dist/.
type ReleaseArtifact struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Arch string `json:"arch,omitempty"`
	Size int64  `json:"size"`
}

// ReleaseImage is one platform's image: its layers and config as a registry serves them.
type ReleaseImage struct {
	Platform       string `json:"platform"`
	CompressedSize int64  `json:"compressed_size"`
}

// LinkedShare is the symbols of one module (or the standard library) in the binary.
type LinkedShare struct {
	Module string `json:"module"`
	Bytes  int64  `json:"bytes"`
}

// readRelease reads dist's metadata.json and tarballs, and the symbol sizes of agent; nil when
// dist holds no release.
func readRelease(dist, agent string) (*ReleaseSizes, error) {
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		return nil, nil
	}
	var meta struct {
		Version   string            `json:"version"`
		Commit    string            `json:"commit"`
		Artifacts []ReleaseArtifact `json:"artifacts"`
		Image     struct {
			Platforms []struct {
				Platform       string `json:"platform"`
				CompressedSize int64  `json:"compressed_size"`
			} `json:"platforms"`
		} `json:"image"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dist, "metadata.json"), err)
	}
	rs := &ReleaseSizes{Version: meta.Version, Commit: meta.Commit, Artifacts: meta.Artifacts, Binaries: map[string]int64{}}
	for _, p := range meta.Image.Platforms {
		rs.Image = append(rs.Image, ReleaseImage{Platform: p.Platform, CompressedSize: p.CompressedSize})
	}
	for _, a := range meta.Artifacts {
		if a.Kind != "archive" {
			continue
		}
		if n, err := binaryInTarball(filepath.Join(dist, a.Name)); err == nil {
			rs.Binaries[a.Arch] = n
		}
	}
	rs.Linked, rs.LinkedTotal = linkedByModule(agent)
	return rs, nil
}

// binaryInTarball returns the size of the kafkatrail-agent binary in a release tarball.
func binaryInTarball(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return 0, fmt.Errorf("%s: no kafkatrail-agent binary", path)
		}
		if err != nil {
			return 0, err
		}
		if filepath.Base(h.Name) == "kafkatrail-agent" && h.Typeflag == tar.TypeReg {
			return h.Size, nil
		}
	}
}

// linkedByModule sums the sizes of binary's symbols that are in the file (ELF symbols of
// sections with contents: not .bss and .noptrbss, zeroed memory such as the FIPS DRBG's 32 MiB
// buffer) by the module of their package (moduleOf).
func linkedByModule(binary string) ([]LinkedShare, int64) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, 0
	}
	sums := map[string]int64{}
	var total int64
	for _, sym := range syms {
		if sym.Size == 0 || int(sym.Section) >= len(f.Sections) || sym.Section == elf.SHN_UNDEF {
			continue
		}
		if f.Sections[sym.Section].Type == elf.SHT_NOBITS {
			continue
		}
		sums[moduleOf(sym.Name)] += int64(sym.Size)
		total += int64(sym.Size)
	}
	var shares []LinkedShare
	for m, n := range sums {
		shares = append(shares, LinkedShare{Module: m, Bytes: n})
	}
	slices.SortFunc(shares, func(a, b LinkedShare) int {
		if a.Bytes != b.Bytes {
			return int(b.Bytes - a.Bytes)
		}
		return strings.Compare(a.Module, b.Module)
	})
	return shares, total
}

// moduleOf names the module of a symbol: "google.golang.org/grpc" for
// google.golang.org/grpc/internal.x, "go.opentelemetry.io/otel/sdk" for
// go.opentelemetry.io/otel/sdk/trace.(*x).y (three path elements for github.com and OpenTelemetry,
// whose modules are that deep, two for the others), "Go (standard library, runtime)" for
// runtime.x or sync/atomic.y.
func moduleOf(sym string) string {
	for _, p := range []string{"type:.eq.", "type:", "go:itab.*", "go:itab.", "go:", "*"} {
		sym = strings.TrimPrefix(sym, p)
	}
	path := sym
	if i := strings.IndexAny(path, "("); i >= 0 {
		path = path[:i]
	}
	slash := strings.LastIndexByte(path, '/')
	if dot := strings.IndexByte(path[slash+1:], '.'); dot >= 0 {
		path = path[:slash+1+dot]
	}
	parts := strings.Split(path, "/")
	if !strings.Contains(parts[0], ".") {
		return "Go (standard library, runtime)"
	}
	depth := 2
	if parts[0] == "github.com" || parts[0] == "go.opentelemetry.io" {
		depth = 3
	}
	if len(parts) > depth {
		parts = parts[:depth]
	}
	return strings.Join(parts, "/")
}

// writeRelease writes the release section.
func (r *Report) writeRelease(w func(string, ...any)) {
	rs := r.Release
	if rs == nil {
		return
	}
	w("## Release artifacts: %s (commit `%.12s`)\n\n", rs.Version, rs.Commit)
	w("What `make release` writes to `dist/` (release/README.md), in bytes. The binary is static (no cgo), stripped (`-s -w`), built with `-trimpath`.\n\n")
	w("| artifact | linux/amd64 | linux/arm64 |\n|---|--:|--:|\n")
	w("| binary `kafkatrail-agent` | %s | %s |\n", groupThousands(fmt.Sprint(rs.Binaries["amd64"])), groupThousands(fmt.Sprint(rs.Binaries["arm64"])))
	byKind := map[string]map[string]int64{}
	for _, a := range rs.Artifacts {
		if byKind[a.Kind] == nil {
			byKind[a.Kind] = map[string]int64{}
		}
		byKind[a.Kind][a.Arch] += a.Size
	}
	for _, k := range []struct{ kind, name string }{{"archive", "tarball (.tar.gz)"}, {"deb", ".deb"}, {"rpm", ".rpm"}} {
		if m := byKind[k.kind]; m != nil {
			w("| %s | %s | %s |\n", k.name, groupThousands(fmt.Sprint(m["amd64"])), groupThousands(fmt.Sprint(m["arm64"])))
		}
	}
	img := map[string]int64{}
	for _, p := range rs.Image {
		img[strings.SplitN(strings.TrimPrefix(p.Platform, "linux/"), "/", 2)[0]] = p.CompressedSize
	}
	w("| image, compressed (what a pull downloads) | %s | %s |\n\n", groupThousands(fmt.Sprint(img["amd64"])), groupThousands(fmt.Sprint(img["arm64"])))
	if len(rs.Linked) == 0 || rs.LinkedTotal == 0 {
		return
	}
	w("What the binary holds, by module: the sizes of its symbols (the ELF symbol table of the bench's own build, which keeps it; %s bytes in all, code and read-only data; the file adds its function tables). The binary's pages are part of the agent's resident memory (the file-backed part of the RSS tables above).\n\n", groupThousands(fmt.Sprint(rs.LinkedTotal)))
	w("| module | bytes | share |\n|---|--:|--:|\n")
	for i, s := range rs.Linked {
		if i == 12 {
			break
		}
		w("| %s | %s | %.1f %% |\n", s.Module, groupThousands(fmt.Sprint(s.Bytes)), 100*float64(s.Bytes)/float64(rs.LinkedTotal))
	}
	w("\nLinked but not needed by every agent: the OTLP exporters' gRPC (google.golang.org/grpc, genproto, grpc-gateway) and protobuf, which `autoexport` brings with its log exporters and the stdout exporters though the agent asks it only for traces and metrics; the Prometheus client (only `/metrics`); SCRAM's string-preparation tables (github.com/xdg-go/stringprep, built at start). Leaving them out would need build tags for an agent without those features.\n\n")
}
