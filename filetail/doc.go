// Package filetail follows log files: it discovers the files its globs match, reads each from
// its checkpoint (or its start position), cuts the bytes into lines under a long-line policy,
// hands every line to a handler, and keeps one checkpoint per file, saved atomically to the
// state directory. It follows a file across renames, rename rotation (the new file at the name
// waits until the old one was read to its end), copytruncate, in-place rewrites, deletion and
// inode reuse: a file is its device, inode and fingerprint of its first bytes (FileID), not its
// name.
//
// It knows nothing of Kafka: a FileHandler makes, for each File, the LineHandler that sends its
// lines, and whoever delivers them reports each outcome back with File.Ack or File.Fail. The
// Splitter that cuts lines is exported for the agent's stdin, which has no file and no
// checkpoint.
//
// # Concurrency
//
// Tailer.Run owns the discovery goroutine (the scans) and one follower goroutine per followed
// file, and returns only after every follower exited. A follower owns its descriptor, its
// splitter and its current File; it calls the LineHandler on its own goroutine, so a handler
// that blocks (backpressure) pauses that file only. Tailer.mu guards the maps of followers and
// saved checkpoints (scans, releases, Stats, Snapshot); a follower's mu guards its name and
// identity, which scans and Stats read. File.Ack and File.Fail come from any goroutine (the
// producer's callbacks): the File's tracker takes its own mutex, while File.Track, on the
// follower's goroutine, only writes an inbox slot and publishes it with an atomic store.
// Counters are atomics, the read side and the acknowledgement side on separate cache lines.
// Saves (Run's ticker, SaveCheckpoints, SaveSnapshot) are serialized by their own mutex.
//
// # The checkpoint invariant
//
// A file's checkpoint only ever moves past lines that were acknowledged, and every line before
// them: the committed offset is the end of the longest prefix of tracked lines all acknowledged
// (File.Committed). A multiline event is one record spanning its lines, tracked when it is handed
// over: the checkpoint is never inside a (whole) event. A failed line pins it there for as long as its File lives, so a restart sends
// that line again rather than skip it. Lines acknowledged after the last save are sent again
// after a crash (at least once); nothing read is lost.
package filetail
