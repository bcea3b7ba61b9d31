package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// entry is one member of a deterministic tar archive.
type entry struct {
	// Name is slash-separated, relative; a directory's ends in "/".
	Name     string
	Mode     int64
	UID, GID int
	// Body is a regular file's content; File, if set, is read instead (large files).
	Body []byte
	File string
}

// dirEntry is a directory owned by root.
func dirEntry(name string, mode int64) entry {
	return entry{Name: strings.TrimSuffix(name, "/") + "/", Mode: mode}
}

func (e entry) isDir() bool { return strings.HasSuffix(e.Name, "/") }

// writeTar writes entries sorted by name, with every timestamp mtime, numeric owners only
// and no atime/ctime: the same entries give the same bytes on any machine.
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(entries); i++ {
		if entries[i].Name == entries[i-1].Name {
			return fmt.Errorf("tar: %s twice", entries[i].Name)
		}
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.Name,
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime,
			// PAX: a name over 100 bytes would need it; every other field fits USTAR, and
			// Go writes no PAX record it does not need, so short names give a plain header.
			Format: tar.FormatPAX,
		}
		var body io.Reader
		switch {
		case e.isDir():
			h.Typeflag = tar.TypeDir
		case e.File != "":
			f, err := os.Open(e.File)
			if err != nil {
				return err
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			h.Typeflag, h.Size, body = tar.TypeReg, fi.Size(), f
		default:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(e.Body)), bytes.NewReader(e.Body)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// gzipTar is writeTar through gzip: no file name and no time in the gzip header (Go writes
// neither unless asked), best compression.
func gzipTar(w io.Writer, entries []entry, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := writeTar(zw, entries, mtime); err != nil {
		return err
	}
	return zw.Close()
}

// writeFileAtomic writes path through a temporary file, so that no half-written artifact is
// ever left under its final name.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// docFiles are the repository's files that go with every artifact; CHANGELOG.md only when
// the commit has one.
func docFiles(src *source) (map[string]string, error) {
	docs := map[string]string{}
	for _, name := range []string{"README.md", "LICENSE", "CHANGELOG.md"} {
		p := filepath.Join(src.dir, name)
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, os.ErrNotExist) && name == "CHANGELOG.md" {
				continue
			}
			return nil, err
		}
		docs[name] = p
	}
	return docs, nil
}

// tarballName is kafkatrail-agent_<version>_linux_<arch>.tar.gz.
func tarballName(version, arch string) string {
	return fmt.Sprintf("%s_%s_linux_%s.tar.gz", PackageName, version, arch)
}

// writeTarball writes one arch's tarball into dir: the binary, the docs and the example
// configuration and unit, under one top-level directory so that extracting it spills nothing.
func writeTarball(src *source, b binary, dir string) (string, error) {
	name := tarballName(src.version, b.arch)
	top := strings.TrimSuffix(name, ".tar.gz")
	docs, err := docFiles(src)
	if err != nil {
		return "", err
	}
	entries := []entry{
		dirEntry(top, 0o755),
		{Name: path.Join(top, PackageName), Mode: 0o755, File: b.path},
		dirEntry(path.Join(top, "configs"), 0o755),
		{Name: path.Join(top, "configs/agent.yaml"), Mode: 0o644, File: filepath.Join(src.dir, "configs/agent.yaml")},
		{Name: path.Join(top, "configs/kafkatrail-agent.service"), Mode: 0o644, File: filepath.Join(src.dir, "configs/kafkatrail-agent.service")},
	}
	for n, p := range docs {
		entries = append(entries, entry{Name: path.Join(top, n), Mode: 0o644, File: p})
	}
	err = writeFileAtomic(filepath.Join(dir, name), func(w io.Writer) error { return gzipTar(w, entries, src.mtime) })
	return name, err
}
