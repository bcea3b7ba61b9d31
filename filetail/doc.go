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
// file, and returns only after every follower exited. Discovery is told of changes at once by an
// inotify watch (inotify.go, whose one reader goroutine Run also owns and closes) on the globs'
// directories: a glob's directory, or the directories a wildcard directory part matches at the
// last scan, and the directories that followed symbolic links point into (the kubelet's
// /var/log/containers links into /var/log/pods, where it rotates), at most Config.MaxWatches of
// them. The reader wakes a followed file's follower itself when the file is written or
// truncated (a non-blocking send on a channel of one, from the map of names Run last
// published), and hands Run every other event: a name the globs match, or any name in a link's
// target directory, created, renamed or removed asks for a scan (a burst of events makes one),
// and a lost-events overflow rescans and wakes every follower. After a read of events that
// came soon after the one before, the reader rests a few milliseconds (watchRest), so that the
// kernel merges a file's writes into one event. Events carry no decision: the
// scans and the followers' own stat and reads decide, as without the watch. The periodic scan
// and the followers' polls stay as the fallback: a filesystem without inotify, a directory that
// could not be watched (the system's watch limit) or beyond MaxWatches, a directory created
// after the last scan, and a file renamed out of the globs that is still written, are seen at
// the next scan or poll. The watches are added before each scan, so a file created after the
// scan makes an event and one created before is seen by it. Only Run's goroutine touches the
// watch's state; the followers by name it wakes are taken under Tailer.mu after each scan. A follower owns its descriptor, its
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
