package filetail

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"syscall"
)

// FileID identifies one file independently of its name. Device and inode tell files apart while
// they exist; the fingerprint (FNV-64a of the first FingerprintLen bytes) tells a file apart from
// a later one that reuses the inode after the first was deleted, which inode numbers alone cannot.
//
// A file shorter than the configured fingerprint size has a short fingerprint; it is lengthened as
// the file grows. Two identities are compared on the length stored with the older one.
type FileID struct {
	Dev, Inode     uint64
	Fingerprint    uint64
	FingerprintLen int
}

// String formats the identity for logs and checkpoint entries: dev:inode:fingerprint/length.
func (id FileID) String() string {
	return fmt.Sprintf("%d:%d:%016x/%d", id.Dev, id.Inode, id.Fingerprint, id.FingerprintLen)
}

// FileKey is device+inode: the key of the files the tailer holds open. While the tailer holds a
// file open its inode cannot be reused, so within one run the key alone is unambiguous.
type FileKey struct{ Dev, Inode uint64 }

// Key is the identity's device and inode.
func (id FileID) Key() FileKey { return FileKey{id.Dev, id.Inode} }

// statKey returns the device and inode of fi (Linux: syscall.Stat_t).
func statKey(fi os.FileInfo) (FileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileKey{}, false
	}
	return FileKey{Dev: uint64(st.Dev), Inode: st.Ino}, true
}

// statLinks returns the number of hard links of fi; 0 means the file was deleted while open.
func statLinks(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// fingerprintOf hashes the first min(size, max) bytes of f. It returns the hash, the number of
// bytes hashed, and, when known is not nil, whether the first known.FingerprintLen bytes still
// hash to known.Fingerprint (one read serves both: FNV is computed incrementally).
func fingerprintOf(f io.ReaderAt, size int64, max int, known *FileID) (fp uint64, n int, prefixOK bool, err error) {
	n = max
	if size < int64(n) {
		n = int(size)
	}
	if known != nil && known.FingerprintLen > n {
		// The file is now shorter than the bytes we fingerprinted: its beginning changed.
		return 0, 0, false, nil
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false, fmt.Errorf("read fingerprint: %w", err)
	}
	if got < n {
		// Shrank between the stat and the read: hash what is there; a caller that compares will
		// see the mismatch on its next look.
		n = got
		if known != nil && known.FingerprintLen > n {
			return 0, 0, false, nil
		}
	}
	h := fnv.New64a()
	prefixOK = true
	if known != nil {
		h.Write(buf[:known.FingerprintLen])
		prefixOK = h.Sum64() == known.Fingerprint
	}
	if known != nil {
		h.Write(buf[known.FingerprintLen:n])
	} else {
		h.Write(buf[:n])
	}
	return h.Sum64(), n, prefixOK, nil
}

// identify builds the identity of the open file f.
func identify(f *os.File, fingerprintBytes int) (FileID, os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return FileID{}, nil, err
	}
	k, ok := statKey(fi)
	if !ok {
		return FileID{}, nil, fmt.Errorf("no device and inode for %s", f.Name())
	}
	fp, n, _, err := fingerprintOf(f, fi.Size(), fingerprintBytes, nil)
	if err != nil {
		return FileID{}, nil, err
	}
	return FileID{Dev: k.Dev, Inode: k.Inode, Fingerprint: fp, FingerprintLen: n}, fi, nil
}

// sameFile reports whether the open file f (whose device and inode are id's) still begins with
// the bytes id was fingerprinted from: false means the inode now holds other content.
func sameFile(f io.ReaderAt, size int64, id FileID) (bool, error) {
	if id.FingerprintLen == 0 {
		return true, nil // nothing to compare: an empty file matches anything
	}
	_, _, ok, err := fingerprintOf(f, size, id.FingerprintLen, &id)
	return ok, err
}
