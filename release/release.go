// Package release builds kafkatrail's release artifacts from one commit of the repository:
// static agent binaries in tarballs, .deb and .rpm packages (nfpm), a multi-arch OCI image
// (go-containerregistry, no daemon) and SHA256SUMS, all reproducible: every timestamp is
// SOURCE_DATE_EPOCH (default: the commit's time), so building the same commit twice with the
// same Go toolchain gives the same bytes.
//
// The agent is built from a clean clone of the commit, not from the working tree, so that
// uncommitted changes of anyone working in the tree never end up in a release, and the
// binary's VCS stamp (go version -m) says vcs.modified=false.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names and metadata shared by every artifact.
const (
	// PackageName is the binary's installed name and the package's name: "agent" alone could
	// collide with anything on a system's PATH.
	PackageName = "kafkatrail-agent"
	// ImageRepository is where the image is published; the OCI layout names it with its tag.
	ImageRepository = "ghcr.io/kafkatrail/kafkatrail-agent"
	// Homepage is the project's source repository (the image's org.opencontainers.image.source).
	Homepage = "https://github.com/kafkatrail/kafkatrail"
	// License is the SPDX identifier of LICENSE.
	License = "Apache-2.0"
	// Vendor names who publishes the packages.
	Vendor = "kafkatrail"
	// Maintainer is the Debian Maintainer and the RPM Packager.
	Maintainer = "kafkatrail maintainers <maintainers@kafkatrail.dev>"
	// Summary is the one-line description of every artifact.
	Summary = "kafkatrail agent: log files into Kafka, traced"
	// Description is the packages' long description.
	Description = Summary + "\n" +
		"Follows log files (globs, rotation, checkpoints of acknowledged lines) and standard\n" +
		"input and produces every line to Apache Kafka, at least once or exactly once, with\n" +
		"OpenTelemetry traces and metrics and a status page."

	versionPkg = "github.com/kafkatrail/kafkatrail/internal/version"
)

// Arches are the architectures a release is built for (GOARCH names).
var Arches = []string{"amd64", "arm64"}

// Formats are the kinds of artifact Build can write.
const (
	FormatTarball = "tar"
	FormatDeb     = "deb"
	FormatRPM     = "rpm"
	FormatImage   = "image"
	// FormatChart is the Helm chart, packaged (kafkatrail-agent-VERSION.tgz).
	FormatChart = "chart"
)

// AllFormats is every format, the default of Options.Formats.
var AllFormats = []string{FormatTarball, FormatDeb, FormatRPM, FormatImage, FormatChart}

// Options says what to build from which commit.
type Options struct {
	// Repo is the repository's root (a git checkout).
	Repo string
	// Rev is the commit to build; "" is HEAD.
	Rev string
	// Out is the output directory. Build writes into a temporary directory next to it and
	// swaps it in at the end, so a failed build leaves the previous one in place.
	Out string
	// Version overrides the commit's VERSION file (tests build a 0.1.1 to upgrade to).
	Version string
	// SourceDateEpoch is every timestamp, in seconds since 1970; 0: $SOURCE_DATE_EPOCH, else
	// the commit's time.
	SourceDateEpoch int64
	// Arches and Formats narrow the build; empty: all of them.
	Arches  []string
	Formats []string
	// CACertificates is the CA bundle copied into the image; "": the certificates of the
	// build machine's Debian ca-certificates package (without the machine's own additions).
	CACertificates string
	// Log receives progress lines; nil: discarded.
	Log io.Writer
}

// Metadata describes one build; Build writes it as metadata.json next to the artifacts.
type Metadata struct {
	Version         string `json:"version"`
	Commit          string `json:"commit"`
	Date            string `json:"date"`
	SourceDateEpoch int64  `json:"source_date_epoch"`
	GoVersion       string `json:"go_version"`
	// VersionLine is what `kafkatrail-agent --version` prints.
	VersionLine string `json:"version_line"`
	// Artifacts are the files listed in SHA256SUMS.
	Artifacts []Artifact `json:"artifacts"`
	// Image is set when the image was built.
	Image *ImageMetadata `json:"image,omitempty"`
}

// Artifact is one file of a release.
type Artifact struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Arch   string `json:"arch,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ImageMetadata describes the OCI image.
type ImageMetadata struct {
	// Name is the image's full name with its tag (the layout's io.containerd.image.name).
	Name string `json:"name"`
	// Tag is the layout's org.opencontainers.image.ref.name: oci:dist/oci:TAG.
	Tag string `json:"tag"`
	// Layout and Archive are the OCI layout directory and the OCI archive, relative to Out.
	Layout  string `json:"layout"`
	Archive string `json:"archive"`
	// IndexDigest is the multi-arch index's digest, what a registry serves for the tag.
	IndexDigest string          `json:"index_digest"`
	Platforms   []ImagePlatform `json:"platforms"`
	// CACertificatesSHA256 identifies the CA bundle in the image: it comes from the build
	// machine, so two machines give the same digest only with the same bundle.
	CACertificatesSHA256 string `json:"ca_certificates_sha256"`
	// CACertificatesSource says where the bundle came from: Debian's ca-certificates package
	// and its version, or the file given.
	CACertificatesSource string `json:"ca_certificates_source"`
}

// ImagePlatform is one platform's manifest in the index.
type ImagePlatform struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	// CompressedSize is what a pull downloads: manifest, config and the gzipped layer.
	CompressedSize int64 `json:"compressed_size"`
}

// source is one checked-out commit and what is derived from it.
type source struct {
	dir     string // clean clone of the commit
	commit  string
	version string
	epoch   int64
	mtime   time.Time
	date    string // RFC 3339, UTC
	goVer   string
}

// binary is one architecture's agent.
type binary struct {
	arch string
	path string
}

var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// Build writes the artifacts of one commit into o.Out and returns their metadata.
func Build(ctx context.Context, o Options) (*Metadata, error) {
	start := time.Now()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "release: "+format+"\n", args...)
		}
	}
	arches := o.Arches
	if len(arches) == 0 {
		arches = Arches
	}
	for _, a := range arches {
		if !slices.Contains(Arches, a) {
			return nil, fmt.Errorf("arch %q: not one of %v", a, Arches)
		}
	}
	formats := o.Formats
	if len(formats) == 0 {
		formats = AllFormats
	}
	for _, f := range formats {
		if !slices.Contains(AllFormats, f) {
			return nil, fmt.Errorf("format %q: not one of %v", f, AllFormats)
		}
	}
	if o.Out == "" {
		return nil, errors.New("no output directory")
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	// The clone, the binaries and nfpm's inputs in the temporary directory; the artifacts in
	// a directory next to out, so that swapping it in is a rename.
	work, err := os.MkdirTemp("", "kafkatrail-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	stage, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".new-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage) // gone already once swapped in
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, err
	}

	src, err := checkout(ctx, o, filepath.Join(work, "src"))
	if err != nil {
		return nil, err
	}
	logf("%s at %s (%s), SOURCE_DATE_EPOCH=%d, %s", src.version, src.commit, src.date, src.epoch, src.goVer)
	if dirty := uncommitted(ctx, o.Repo); dirty != "" {
		logf("note: the working tree has changes that are not committed; the release is built from %s without them:\n%s", src.commit[:12], dirty)
	}

	t := time.Now()
	bins, err := buildBinaries(ctx, src, arches, filepath.Join(work, "bin"))
	if err != nil {
		return nil, err
	}
	logf("binaries built in %s", time.Since(t).Round(100*time.Millisecond))
	versionLine, err := checkVersion(ctx, src, bins, filepath.Join(work, "bin"))
	if err != nil {
		return nil, err
	}
	help, err := helpText(ctx, src, bins, filepath.Join(work, "bin"))
	if err != nil {
		return nil, err
	}

	meta := &Metadata{
		Version: src.version, Commit: src.commit, Date: src.date, SourceDateEpoch: src.epoch,
		GoVersion: src.goVer, VersionLine: versionLine,
	}
	// Each artifact on a goroutine of its own, at most one per CPU at a time: the compressors
	// (gzip, xz) are single-threaded, so that is what keeps every core busy.
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	addArtifacts := func(kind, arch string, names ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			meta.Artifacts = append(meta.Artifacts, Artifact{Name: n, Kind: kind, Arch: arch})
		}
	}
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	spawn := func(name string, f func() error) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t := time.Now()
			if err := f(); err != nil {
				fail(fmt.Errorf("%s: %w", name, err))
				return
			}
			logf("%s written in %s", name, time.Since(t).Round(100*time.Millisecond))
		})
	}
	for _, b := range bins {
		if slices.Contains(formats, FormatTarball) {
			spawn("tarball "+b.arch, func() error {
				name, err := writeTarball(src, b, stage)
				if err == nil {
					addArtifacts("archive", b.arch, name)
				}
				return err
			})
		}
		for _, f := range []string{FormatDeb, FormatRPM} {
			if !slices.Contains(formats, f) {
				continue
			}
			spawn(f+" "+b.arch, func() error {
				name, err := writePackage(f, src, b, help, filepath.Join(work, "pkg-"+f+"-"+b.arch), stage)
				if err == nil {
					addArtifacts(f, b.arch, name)
				}
				return err
			})
		}
	}
	if slices.Contains(formats, FormatChart) {
		spawn("chart", func() error {
			name, err := writeChart(src, stage)
			if err == nil {
				addArtifacts("helm-chart", "", name)
			}
			return err
		})
	}
	if slices.Contains(formats, FormatImage) {
		spawn("image", func() error {
			im, archive, err := writeImage(src, bins, o.CACertificates, stage)
			if err == nil {
				mu.Lock()
				meta.Image = im
				mu.Unlock()
				addArtifacts("oci-archive", "", archive)
			}
			return err
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	slices.SortFunc(meta.Artifacts, func(a, b Artifact) int { return strings.Compare(a.Name, b.Name) })
	var sums bytes.Buffer
	for i := range meta.Artifacts {
		a := &meta.Artifacts[i]
		sum, size, err := fileSHA256(filepath.Join(stage, a.Name))
		if err != nil {
			return nil, err
		}
		a.SHA256, a.Size = sum, size
		fmt.Fprintf(&sums, "%s  %s\n", sum, a.Name)
	}
	if err := os.WriteFile(filepath.Join(stage, "SHA256SUMS"), sums.Bytes(), 0o644); err != nil {
		return nil, err
	}
	j, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(stage, "metadata.json"), append(j, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := replaceDir(stage, out); err != nil {
		return nil, err
	}
	logf("%d artifacts in %s after %s", len(meta.Artifacts), o.Out, time.Since(start).Round(100*time.Millisecond))
	return meta, nil
}

// replaceDir moves stage to out, and whatever was at out out of the way first.
func replaceDir(stage, out string) error {
	old := stage + ".old"
	if err := os.Rename(out, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(stage, out); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// checkout clones the commit into dir and reads its version, time and toolchain.
func checkout(ctx context.Context, o Options, dir string) (*source, error) {
	repo, err := filepath.Abs(o.Repo)
	if err != nil {
		return nil, err
	}
	rev := o.Rev
	if rev == "" {
		rev = "HEAD"
	}
	commit, err := git(ctx, repo, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return nil, err
	}
	// --shared borrows the objects instead of copying them: a clone costs next to nothing.
	if _, err := git(ctx, repo, "clone", "--quiet", "--shared", "--no-checkout", repo, dir); err != nil {
		return nil, err
	}
	// autocrlf off: the files must be the commit's bytes whatever the user's git config says.
	if _, err := git(ctx, dir, "-c", "core.autocrlf=false", "checkout", "--quiet", "--detach", commit); err != nil {
		return nil, err
	}
	s := &source{dir: dir, commit: commit, version: o.Version}
	if s.version == "" {
		v, err := os.ReadFile(filepath.Join(dir, "VERSION"))
		if err != nil {
			return nil, fmt.Errorf("the commit's VERSION: %w", err)
		}
		s.version = strings.TrimSpace(string(v))
	}
	s.version = strings.TrimPrefix(s.version, "v")
	if !versionRE.MatchString(s.version) {
		return nil, fmt.Errorf("version %q: want MAJOR.MINOR.PATCH[-PRERELEASE]", s.version)
	}
	s.epoch = o.SourceDateEpoch
	if s.epoch == 0 {
		if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
			if s.epoch, err = strconv.ParseInt(e, 10, 64); err != nil {
				return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", e, err)
			}
		}
	}
	if s.epoch == 0 {
		ct, err := git(ctx, dir, "log", "-1", "--format=%ct", commit)
		if err != nil {
			return nil, err
		}
		if s.epoch, err = strconv.ParseInt(ct, 10, 64); err != nil {
			return nil, fmt.Errorf("commit time %q: %w", ct, err)
		}
	}
	if s.epoch <= 0 {
		return nil, fmt.Errorf("SOURCE_DATE_EPOCH %d: want a positive number of seconds", s.epoch)
	}
	s.mtime = time.Unix(s.epoch, 0).UTC()
	s.date = s.mtime.Format(time.RFC3339)
	gv, err := goCmd(ctx, dir, nil, "env", "GOVERSION")
	if err != nil {
		return nil, err
	}
	s.goVer = strings.TrimSpace(gv)
	return s, nil
}

// uncommitted lists the working tree's changes to tracked files ("" when there are none or
// git cannot say): they are not in the release, which the user may not expect.
func uncommitted(ctx context.Context, repo string) string {
	out, err := git(ctx, repo, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return ""
	}
	return out
}

// buildBinaries builds the static agent for each arch, concurrently.
func buildBinaries(ctx context.Context, src *source, arches []string, dir string) ([]binary, error) {
	bins := make([]binary, len(arches))
	errs := make([]error, len(arches))
	var wg sync.WaitGroup
	for i, arch := range arches {
		bins[i] = binary{arch: arch, path: filepath.Join(dir, arch, PackageName)}
		wg.Go(func() { errs[i] = goBuild(ctx, src, arch, bins[i].path, true) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return bins, nil
}

// goBuild builds cmd/agent for linux/arch. strip drops the symbol tables (-s -w), which
// releases do; the size report builds with them to name what takes the space.
func goBuild(ctx context.Context, src *source, arch, out string, strip bool) error {
	ldflags := []string{"-buildid="}
	if strip {
		ldflags = append(ldflags, "-s", "-w")
	}
	ldflags = append(ldflags,
		"-X", versionPkg+".version="+src.version,
		"-X", versionPkg+".commit="+src.commit,
		"-X", versionPkg+".date="+src.date,
	)
	env := []string{
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch,
		// Pinned so that a developer's environment cannot change the bytes: GOFLAGS may carry
		// -buildvcs=false or -race, GOAMD64/GOARM64 the instruction set.
		"GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOWORK=off",
	}
	// -buildvcs=auto: the clone is clean, so the VCS stamp (revision, commit time,
	// modified=false) is the same on every build and worth keeping for `go version -m`.
	_, err := goCmd(ctx, src.dir, env, "build", "-trimpath", "-buildvcs=auto",
		// No value has a space (the version is checked, the others are a hash and a date), so
		// the flags join without quoting.
		"-ldflags="+strings.Join(ldflags, " "), "-o", out, "./cmd/agent")
	if err != nil {
		return fmt.Errorf("go build linux/%s: %w", arch, err)
	}
	return checkStatic(out, arch)
}

// checkStatic fails unless path is a static ELF executable for arch: no interpreter, no
// shared libraries (a cgo dependency sneaking in would break the image and old distributions).
func checkStatic(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		return fmt.Errorf("%s: machine %v, want %v", path, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (has an interpreter)", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s: links %v", path, libs)
	}
	return nil
}

// hostBinary returns a binary this machine can run, building one if the release has none for
// its architecture.
func hostBinary(ctx context.Context, src *source, bins []binary, dir string) (string, error) {
	for _, b := range bins {
		if b.arch == runtime.GOARCH && runtime.GOOS == "linux" {
			return b.path, nil
		}
	}
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("the --help text comes from running the agent: build on linux")
	}
	p := filepath.Join(dir, "host", PackageName)
	return p, goBuild(ctx, src, runtime.GOARCH, p, true)
}

// checkVersion runs the agent's --version: an -X with a misspelt package path is silently
// ignored by the linker, so this is where a broken version stamp is caught.
func checkVersion(ctx context.Context, src *source, bins []binary, dir string) (string, error) {
	bin, err := hostBinary(ctx, src, bins, dir)
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	got := strings.TrimSpace(string(out))
	want := fmt.Sprintf("kafkatrail agent %s (commit %s, built %s, %s)", src.version, src.commit[:12], src.date, src.goVer)
	if got != want {
		return "", fmt.Errorf("%s --version printed %q, want %q", bin, got, want)
	}
	return got, nil
}

// helpText is the agent's --help as the packaged service sees it: state-dir's default comes
// from $STATE_DIRECTORY (systemd's StateDirectory=), and nothing else of this machine's
// environment (HOME, hostname) may leak into the bytes.
func helpText(ctx context.Context, src *source, bins []binary, dir string) ([]byte, error) {
	bin, err := hostBinary(ctx, src, bins, dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = []string{"STATE_DIRECTORY=/var/lib/kafkatrail", "HOME=/nonexistent", "LANG=C"}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s --help: %w\n%s", bin, err, stderr.Bytes())
	}
	if !bytes.Contains(stderr.Bytes(), []byte("--brokers")) {
		return nil, fmt.Errorf("%s --help printed no flags:\n%s", bin, stderr.Bytes())
	}
	return stderr.Bytes(), nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// goCmd runs the go command in dir with the process's environment plus env.
func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// goBin is $GO (the Makefile's GO variable), else go on PATH.
func goBin() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
