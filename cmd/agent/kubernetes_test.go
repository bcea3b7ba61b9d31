package main

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/filetail"
	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/statuspage"
)

// TestKubeletTree runs the agent on a kubelet-like tree in a temporary directory, as a node's
// DaemonSet would (--tail '<root>/var/log/containers/*.log' --container-format auto, one topic
// per namespace), while the "runtimes" write to it: containerd (CRI) and docker json-file pods
// in two namespaces, stdout and stderr, a 40 KiB line the runtime cut into 16+16+8 KiB pieces,
// JSON escapes in docker's logs; a kubelet rotation under load (0.log renamed to
// 0.log.<time>, a new 0.log, the rotated file gzipped and deleted once read); a container
// restart (1.log, a new /var/log/containers link with a new container id); two pods deleted.
//
// Every line written must arrive exactly once, whole, in its namespace's topic, with its pod's
// fields in the JSON envelope, its stream, the runtime's time as @timestamp and as the record's
// CreateTime, and its restart count in a header; the deleted pods' and deleted rotated files'
// checkpoints must leave checkpoints.json (once the agent releases the files, ReleaseIdle after
// their last line), and every file still there must be checkpointed at its end.
func TestKubeletTree(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	// Unique topics: the test broker is shared by every test of `make test`, and by reruns.
	prefix := fmt.Sprintf("kt-kubelet-%d-", time.Now().UnixNano())
	topicOf := func(ns string) string { return prefix + "logs-" + ns }
	createTopics(t, 2, topicOf("shop"), topicOf("payments"))

	k := newKubelet(t, t.TempDir(), topicOf)
	state := filepath.Join(t.TempDir(), "state")
	zone := time.FixedZone("", 2*3600) // containerd writes local times with their offset
	web := k.container("shop", "web-7d9f8c6b5-x2kqz", "3b8e2f1c-6c1d-4a55-9a0e-6f0a1c2d3e4f", "nginx", false, zone)
	cart := k.container("shop", "cart-5c7b9d-qq8wn", "a0d1e2f3-1111-4222-8333-944455566677", "cart", true, time.UTC)
	cron := k.container("shop", "cron-28391734-zx7lp", "c0c0c0c0-2222-4333-8444-955566677788", "job", false, time.UTC)
	api := k.container("payments", "api-6f4d8b7c9-m5v2t", "d1d1d1d1-3333-4444-8555-966677788899", "app", false, time.UTC)
	ledger := k.container("payments", "ledger-0", "e2e2e2e2-4444-4555-8666-977788899900", "ledger", true, time.UTC)
	all := []*kubeContainer{web, cart, cron, api, ledger}

	// What the nodes' files hold before the agent starts: read from the beginning.
	for _, c := range all {
		c.lines(filetail.StreamStdout, 20)
		c.lines(filetail.StreamStderr, 5)
	}

	rec := newKubeCollector(t, bootstrap, topicOf("shop"), topicOf("payments"))
	a := startAgent(t, nil, "--brokers", bootstrap, "--tail", filepath.Join(k.root, "var/log/containers/*.log"),
		"--container-format", "auto", "--topic", prefix+"logs-{k8s.namespace.name}", "--format", "json",
		"--header", "restart={k8s.container.restart_count}", "--start-at", "beginning", "--state-dir", state,
		"--http", "127.0.0.1:0", "--log-level", "info", "--log-format", "text")

	// Written while the agent runs: more of both streams, a line in three pieces in each runtime's
	// framing, and docker's JSON escapes.
	for _, c := range all {
		c.lines(filetail.StreamStdout, 30)
		c.lines(filetail.StreamStderr, 10)
	}
	cart.escapes()
	cart.pieces(filetail.StreamStdout, 40<<10, 16<<10, 16<<10, 8<<10)
	api.pieces(filetail.StreamStdout, 40<<10, 16<<10, 16<<10, 8<<10)
	api.pieces(filetail.StreamStderr, 40<<10, 16<<10, 16<<10, 8<<10)
	cron.pieces(filetail.StreamStdout, 40<<10, 16<<10, 16<<10, 8<<10)

	// Two pods deleted once their lines are in Kafka: the kubelet removes the container (docker
	// rm removes its json log too), its /var/log/containers link and the pod's directory.
	rec.waitFor(t, "the lines of the pods to delete", 60*time.Second, a, cron.ids(), ledger.ids())
	var gone []goneFile
	gone = append(gone, cron.deletePod()...)
	gone = append(gone, ledger.deletePod()...)
	podsDeleted := time.Now()

	// A kubelet rotation under load: web is written at about 5,000 lines a second while the
	// kubelet renames its 0.log twice. The kubelet gzips a rotated file at its next rotation;
	// here, once its lines are in Kafka (the agent read it to its end), since deleting a file the
	// agent has not read would lose lines by construction.
	loadStart := time.Now()
	load := web.startLoad(50, 10*time.Millisecond)
	rec.waitFor(t, "web's first lines under load", 30*time.Second, a, web.ids())
	rotated1 := web.rotate(time.Now())
	time.Sleep(300 * time.Millisecond) // lines written to the new 0.log before the next step

	// A container restart meanwhile: 1.log beside 0.log, a new link with a new container id.
	api.lines(filetail.StreamStdout, 15)
	api.restart()
	api.lines(filetail.StreamStdout, 15)
	api.lines(filetail.StreamStderr, 5)
	api.pieces(filetail.StreamStdout, 40<<10, 16<<10, 16<<10, 8<<10)

	rec.waitFor(t, "the lines of web's first rotated file", 30*time.Second, a, web.idsOf(0))
	gone = append(gone, web.compress(rotated1))
	rotated2 := web.rotate(time.Now().Add(time.Second)) // the kubelet's names have seconds: keep them distinct
	time.Sleep(time.Second)                             // the new 0.log under load
	loaded, loadTime := load.stop(), time.Since(loadStart)
	rec.waitFor(t, "the lines of web's second rotated file", 30*time.Second, a, web.idsOf(1))
	gone = append(gone, web.compress(rotated2))
	filesDeleted := time.Now()

	for _, c := range all {
		if c != cron && c != ledger {
			c.lines(filetail.StreamStdout, 10) // after the rotations, restart and deletions
		}
	}
	rec.waitFor(t, "every line written", 60*time.Second, a, k.allIDs())
	t.Logf("%d lines written (%d by web in %v under load, rotated twice); every one in Kafka", len(k.want), loaded, loadTime.Round(time.Millisecond))

	// The files still on the node: each checkpointed at its end, in the container format it is
	// in, with no line out of its format.
	live := []string{web.file, cart.file, api.file, filepath.Join(filepath.Dir(api.file), "0.log")}
	waitCond(t, "the live files checkpointed at their ends", func() bool { return k.checkpointedAtEnd(state, live) == "" }, a)
	var st statuspage.Status
	getStatus(t, a, &st)
	if len(st.Files) == 0 {
		t.Errorf("/api/status lists no file")
	}
	for _, f := range st.Files {
		want := k.format(f.Path)
		if f.ContainerFormat != want || f.LinesMalformed != 0 || f.LinesFailed != 0 {
			t.Errorf("/api/status: %s: format %q, %d malformed, %d failed; want %s, none", f.Path, f.ContainerFormat, f.LinesMalformed, f.LinesFailed, want)
		}
	}

	// The deleted files' checkpoints go once the agent releases them: ReleaseIdle after their
	// last line, then the next save. Beyond that, they would be kept for good.
	deadline := filesDeleted.Add(filetail.DefaultReleaseIdle + 15*time.Second)
	var listed []string
	for {
		listed = k.listedGone(state, gone)
		if len(listed) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(listed) > 0 {
		t.Errorf("checkpoints.json still lists deleted files %v after %v (pods deleted %v ago); agent log:\n%s",
			listed, time.Since(filesDeleted).Round(time.Second), time.Since(podsDeleted).Round(time.Second), a.log())
	} else {
		t.Logf("deleted files out of checkpoints.json %v after the pods' deletion, %v after the rotated files'",
			time.Since(podsDeleted).Round(100*time.Millisecond), time.Since(filesDeleted).Round(100*time.Millisecond))
	}
	if msg := k.checkpointedAtEnd(state, live); msg != "" {
		t.Errorf("after the releases: %s", msg)
	}

	a.stop(time.Minute)
	rec.drain(t)
	k.check(t, rec)
}

// kubelet is a kubelet-like tree under root (root/var/log/containers, root/var/log/pods,
// root/var/lib/docker/containers) and the lines written to it, by id.
type kubelet struct {
	t       *testing.T
	root    string
	topicOf func(ns string) string
	base    time.Time // the runtime time of line n is base + n ms (+ a sub-millisecond part)

	mu      sync.Mutex
	want    map[string]*kubeLine
	next    int
	formats map[string]string // the container format of each /var/log/containers link made
}

// format is the container format of the files behind a /var/log/containers link.
func (k *kubelet) format(link string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.formats[link]
}

// kubeLine is a line a container wrote and the record it must become.
type kubeLine struct {
	topic, message, stream, restart, path string
	ns, pod, uid, container, containerID  string
	time                                  time.Time
}

func newKubelet(t *testing.T, root string, topicOf func(string) string) *kubelet {
	// An hour ago: Kafka refuses CreateTimes over an hour ahead (message.timestamp.after.max.ms).
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	return &kubelet{t: t, root: root, topicOf: topicOf, base: base, want: make(map[string]*kubeLine), formats: make(map[string]string)}
}

// newLine numbers a line and returns its id and runtime time. The sub-millisecond part is there
// so that a CreateTime not truncated to milliseconds shows.
func (k *kubelet) newLine() (string, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.next
	k.next++
	return fmt.Sprintf("L%06d", n), k.base.Add(time.Duration(n)*time.Millisecond + 987654)
}

func (k *kubelet) add(id string, l *kubeLine) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.want[id] = l
}

func (k *kubelet) allIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	ids := make([]string, 0, len(k.want))
	for id := range k.want {
		ids = append(ids, id)
	}
	return ids
}

// kubeContainer is one container of a pod, as its runtime and the kubelet lay out its logs.
type kubeContainer struct {
	k                  *kubelet
	ns, pod, uid, name string
	docker             bool           // docker json-file; else CRI (containerd, CRI-O)
	zone               *time.Location // the zone of the runtime's times

	mu     sync.Mutex // the load's writer and the test's rotations
	id     string     // the current container's id
	run    int        // its restart count
	link   string     // /var/log/containers/<pod>_<ns>_<name>-<id>.log
	podLog string     // /var/log/pods/<ns>_<pod>_<uid>/<name>/<restart>.log
	file   string     // the file the runtime writes: podLog (CRI) or docker's json log
	f      *os.File   // open on file, in append mode, as the runtime keeps it
	gen    int        // rotations of the current file: ids[gen] are written to it
	ided   [][]string
}

func (k *kubelet) container(ns, pod, uid, name string, docker bool, zone *time.Location) *kubeContainer {
	c := &kubeContainer{k: k, ns: ns, pod: pod, uid: uid, name: name, docker: docker, zone: zone}
	c.start(0)
	return c
}

func (c *kubeContainer) podDir() string {
	return filepath.Join(c.k.root, "var/log/pods", c.ns+"_"+c.pod+"_"+c.uid)
}

func (c *kubeContainer) dockerDir() string {
	return filepath.Join(c.k.root, "var/lib/docker/containers", c.id)
}

// start lays out the files of the container's run number restart, with a new container id.
func (c *kubeContainer) start(restart int) {
	t := c.k.t
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	c.id, c.run = hex.EncodeToString(b[:]), restart
	c.podLog = filepath.Join(c.podDir(), c.name, fmt.Sprintf("%d.log", restart))
	c.file = c.podLog
	if c.docker {
		c.file = filepath.Join(c.dockerDir(), c.id+"-json.log")
	}
	c.link = filepath.Join(c.k.root, "var/log/containers", c.pod+"_"+c.ns+"_"+c.name+"-"+c.id+".log")
	for _, p := range []string{c.file, c.podLog, c.link} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.open()
	if c.docker {
		mustSymlink(t, c.file, c.podLog)
	}
	mustSymlink(t, c.podLog, c.link)
	c.k.mu.Lock()
	c.k.formats[c.link] = map[bool]string{false: "cri", true: "docker"}[c.docker]
	c.k.mu.Unlock()
	c.gen, c.ided = 0, append(c.ided[:0:0], nil)
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func (c *kubeContainer) open() {
	f, err := os.OpenFile(c.file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		c.k.t.Fatal(err)
	}
	c.f = f
}

// write appends one raw line (or piece) in one write, as a runtime does.
func (c *kubeContainer) write(b []byte) {
	if _, err := c.f.Write(b); err != nil {
		c.k.t.Error(err) // also from the load's goroutine: no Fatal there
	}
}

// frame is the runtime's framing of one piece of a message: last is its final piece.
func (c *kubeContainer) frame(tm time.Time, stream filetail.Stream, piece string, last bool) []byte {
	ts := tm.In(c.zone).Format(time.RFC3339Nano)
	if c.docker {
		if last {
			piece += "\n"
		}
		log, _ := json.Marshal(piece) // escapes <, > and & as \u003c…, as docker's encoder does
		return fmt.Appendf(nil, `{"log":%s,"stream":"%s","time":"%s"}`+"\n", log, stream, ts)
	}
	tag := "P"
	if last {
		tag = "F"
	}
	return fmt.Appendf(nil, "%s %s %s %s\n", ts, stream, tag, piece)
}

// expect records the line id of message will become; the caller holds c.mu.
func (c *kubeContainer) expect(id, message string, stream filetail.Stream, tm time.Time) {
	c.ided[c.gen] = append(c.ided[c.gen], id)
	c.k.add(id, &kubeLine{
		topic: c.k.topicOf(c.ns), message: message, stream: stream.String(), restart: fmt.Sprint(c.run), path: c.link,
		ns: c.ns, pod: c.pod, uid: c.uid, container: c.name, containerID: c.id, time: tm,
	})
}

// lines writes n lines to stream.
func (c *kubeContainer) lines(stream filetail.Stream, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.linesLocked(stream, n)
}

func (c *kubeContainer) linesLocked(stream filetail.Stream, n int) {
	var buf []byte
	for range n {
		id, tm := c.k.newLine()
		msg := fmt.Sprintf("%s %s/%s %s: GET /api/v1/items?page=%d 200 \"curl/8.5\"", id, c.ns, c.pod, stream, len(id))
		c.expect(id, msg, stream, tm)
		buf = append(buf, c.frame(tm, stream, msg, true)...)
	}
	c.write(buf)
}

// pieces writes one message of size bytes as the runtime writes a long line: pieces of the
// given sizes, each its own write with its own time; the record takes the first piece's.
func (c *kubeContainer) pieces(stream filetail.Stream, size int, sizes ...int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, tm := c.k.newLine()
	var b strings.Builder
	b.WriteString(id + " ")
	for i := 0; b.Len() < size; i++ {
		b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789-_"[i%38])
	}
	msg := b.String()
	c.expect(id, msg, stream, tm)
	rest := msg
	for i, n := range sizes {
		// Milliseconds apart, so that a record taking another piece's time shows.
		c.write(c.frame(tm.Add(time.Duration(i)*time.Millisecond), stream, rest[:n], i == len(sizes)-1))
		rest = rest[n:]
	}
	if rest != "" {
		c.k.t.Fatalf("pieces %v do not add up to %d bytes", sizes, size)
	}
}

// escapes writes a docker line whose log uses every kind of JSON escape.
func (c *kubeContainer) escapes() {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, tm := c.k.newLine()
	raw := id + ` tab\there \"quoted\" back\\slash sl\/ash caf\u00e9 smile \ud83d\ude00 \u003cb\u003e \u0026 ctl\u0001 cr\r`
	msg := id + " tab\there \"quoted\" back\\slash sl/ash café smile 😀 <b> & ctl\x01 cr\r"
	c.expect(id, msg, filetail.StreamStderr, tm)
	c.write(fmt.Appendf(nil, `{"log":"%s\n","stream":"stderr","time":"%s"}`+"\n", raw, tm.In(c.zone).Format(time.RFC3339Nano)))
}

// ids returns the ids of every line the container's current run wrote so far, in all its files.
func (c *kubeContainer) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []string
	for _, g := range c.ided {
		all = append(all, g...)
	}
	return all
}

// idsOf returns the ids of the lines written to the file of rotation gen.
func (c *kubeContainer) idsOf(gen int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ided[gen])
}

// goneFile is a file deleted from the node: its names and identity, which checkpoints.json
// must drop.
type goneFile struct {
	names    []string
	dev, ino uint64
}

func fileKeyOf(t *testing.T, path string) (dev, ino uint64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return uint64(st.Dev), st.Ino
}

// deletePod deletes the pod as the kubelet does once its containers stopped: the container
// removed (docker's json log with it), its link, then the pod's log directory.
func (c *kubeContainer) deletePod() []goneFile {
	t := c.k.t
	c.mu.Lock()
	defer c.mu.Unlock()
	dev, ino := fileKeyOf(t, c.file)
	g := goneFile{names: []string{c.link, c.podLog, c.file}, dev: dev, ino: ino}
	c.f.Close()
	if err := os.Remove(c.link); err != nil {
		t.Fatal(err)
	}
	if c.docker {
		if err := os.RemoveAll(c.dockerDir()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(c.podDir()); err != nil {
		t.Fatal(err)
	}
	return []goneFile{g}
}

// restart is the container's restart: the new container's 1.log beside 0.log, a link with its
// new id, and the old link removed (0.log stays, for kubectl logs --previous).
func (c *kubeContainer) restart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.link
	c.f.Close()
	c.start(c.run + 1)
	if err := os.Remove(old); err != nil {
		c.k.t.Fatal(err)
	}
}

// rotate is the kubelet's rotation of a CRI container's log: 0.log renamed to
// 0.log.<now as 20060102-150405>, and the runtime asked to reopen it. Lines the runtime
// writes before it reopens go to the renamed file. It returns the rotated file's name.
func (c *kubeContainer) rotate(now time.Time) string {
	t := c.k.t
	c.mu.Lock()
	defer c.mu.Unlock()
	rotated := c.podLog + "." + now.UTC().Format("20060102-150405")
	if err := os.Rename(c.podLog, rotated); err != nil {
		t.Fatal(err)
	}
	c.linesLocked(filetail.StreamStdout, 20) // still on the old descriptor: into the rotated file
	c.f.Close()
	c.open()
	c.gen++
	c.ided = append(c.ided, nil)
	return rotated
}

// compress is what the kubelet does to a rotated file older than the newest: gzip it to
// <name>.gz (through a temporary file) and delete it.
func (c *kubeContainer) compress(rotated string) goneFile {
	t := c.k.t
	dev, ino := fileKeyOf(t, rotated)
	in, err := os.Open(rotated)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(rotated + ".gz.tmp")
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rotated+".gz.tmp", rotated+".gz"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(rotated); err != nil {
		t.Fatal(err)
	}
	// Not c.link: while followed the file is listed under the link, which now names the new
	// 0.log; its identity tells them apart.
	return goneFile{names: []string{rotated}, dev: dev, ino: ino}
}

// kubeLoad writes lines to a container at a steady pace until stopped.
type kubeLoad struct {
	stopped, done chan struct{}
	once          sync.Once
	n             int
}

// startLoad writes batch lines (every fifth batch to stderr) every period. A test that fails
// first stops it at its end, so that it does not write (and log) after the test.
func (c *kubeContainer) startLoad(batch int, period time.Duration) *kubeLoad {
	l := &kubeLoad{stopped: make(chan struct{}), done: make(chan struct{})}
	c.k.t.Cleanup(func() { l.stop() })
	go func() {
		defer close(l.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			stream := filetail.StreamStdout
			if i%5 == 4 {
				stream = filetail.StreamStderr
			}
			c.lines(stream, batch)
			l.n += batch
		}
	}()
	return l
}

// stop stops the writer and returns the lines it wrote.
func (l *kubeLoad) stop() int {
	l.once.Do(func() { close(l.stopped) })
	<-l.done
	return l.n
}

// kubeEntry is one entry of checkpoints.json.
type kubeEntry struct {
	Path   string `json:"path"`
	Dev    uint64 `json:"dev"`
	Inode  uint64 `json:"inode"`
	Offset int64  `json:"offset"`
}

func (k *kubelet) checkpoints(state string) []kubeEntry {
	b, err := os.ReadFile(filepath.Join(state, "checkpoints.json"))
	if err != nil {
		return nil
	}
	var cp struct {
		Entries []kubeEntry `json:"entries"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		k.t.Fatalf("checkpoints.json: %v", err)
	}
	return cp.Entries
}

// listedGone returns the entries of checkpoints.json that are deleted files': by a name the
// file had, or by its identity unless that inode now holds the file at the entry's path (the
// inode was reused).
func (k *kubelet) listedGone(state string, gone []goneFile) []string {
	var listed []string
	for _, e := range k.checkpoints(state) {
		for _, g := range gone {
			byName := slices.Contains(g.names, e.Path)
			byKey := e.Dev == g.dev && e.Inode == g.ino && !isFile(e.Path, g.dev, g.ino)
			if byName || byKey {
				listed = append(listed, fmt.Sprintf("%s (inode %d, offset %d)", e.Path, e.Inode, e.Offset))
				break
			}
		}
	}
	return listed
}

func isFile(path string, dev, ino uint64) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st := fi.Sys().(*syscall.Stat_t)
	return uint64(st.Dev) == dev && st.Ino == ino
}

// checkpointedAtEnd returns "" when every file in paths has a checkpoint entry (by identity)
// at its size, else what is not.
func (k *kubelet) checkpointedAtEnd(state string, paths []string) string {
	entries := k.checkpoints(state)
	var bad []string
	for _, p := range paths {
		dev, ino := fileKeyOf(k.t, p)
		size := fileSize(k.t, p)
		found := false
		for _, e := range entries {
			if e.Dev == dev && e.Inode == ino {
				found = true
				if e.Offset != size {
					bad = append(bad, fmt.Sprintf("%s: checkpoint %d (as %s) of %d bytes", p, e.Offset, e.Path, size))
				}
			}
		}
		if !found {
			bad = append(bad, p+": no checkpoint")
		}
	}
	return strings.Join(bad, "; ")
}

// kubeCollector reads the namespaces' topics from their start while the test runs, keeping
// every record by the id its message starts with.
type kubeCollector struct {
	cl     *kgo.Client
	topics []string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	byID    map[string][]*kgo.Record
	odd     []*kgo.Record              // records whose value is not an envelope with an id
	next    map[string]map[int32]int64 // the offset after the last record read, by partition
	changed chan struct{}              // closed and replaced at each fetch
}

func newKubeCollector(t *testing.T, bootstrap string, topics ...string) *kubeCollector {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &kubeCollector{cl: cl, topics: topics, cancel: cancel, done: make(chan struct{}),
		byID: make(map[string][]*kgo.Record), next: make(map[string]map[int32]int64), changed: make(chan struct{})}
	for _, tp := range topics {
		c.next[tp] = make(map[int32]int64)
	}
	go c.run(ctx)
	t.Cleanup(c.stop)
	return c
}

func (c *kubeCollector) run(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			c.next[r.Topic][r.Partition] = r.Offset + 1
			var v struct {
				Message string `json:"message"`
			}
			id := ""
			if json.Unmarshal(r.Value, &v) == nil {
				id, _, _ = strings.Cut(v.Message, " ")
			}
			if id == "" {
				c.odd = append(c.odd, r)
				return
			}
			c.byID[id] = append(c.byID[id], r)
		})
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

func (c *kubeCollector) stop() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

// waitFor waits until a record of every id in the lists arrived; it fails the test at timeout
// with the ids missing.
func (c *kubeCollector) waitFor(t *testing.T, what string, timeout time.Duration, a *runningAgent, lists ...[]string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		changed := c.changed
		var missing []string
		for _, ids := range lists {
			for _, id := range ids {
				if len(c.byID[id]) == 0 {
					missing = append(missing, id)
				}
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			sort.Strings(missing)
			t.Fatalf("%s: %d lines not in Kafka after %v (first: %v); agent log:\n%s",
				what, len(missing), timeout, missing[:min(len(missing), 10)], a.log())
		}
	}
}

// drain waits until the collector has read every topic to its end offsets now.
func (c *kubeCollector) drain(t *testing.T) {
	t.Helper()
	adm := kadm.NewClient(kafkatest.NewClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, c.topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	for {
		c.mu.Lock()
		changed, behind := c.changed, ""
		ends.Each(func(o kadm.ListedOffset) {
			if c.next[o.Topic][o.Partition] < o.Offset {
				behind = fmt.Sprintf("%s[%d] read to %d of %d", o.Topic, o.Partition, c.next[o.Topic][o.Partition], o.Offset)
			}
		})
		c.mu.Unlock()
		if behind == "" {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("reading the topics back: %s", behind)
		}
	}
}

// check compares every record with the line it must be: each line exactly once, nothing else.
func (k *kubelet) check(t *testing.T, c *kubeCollector) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.odd {
		t.Errorf("%s[%d]@%d: a record that is no line of the test: %.200s", r.Topic, r.Partition, r.Offset, r.Value)
	}
	for id := range c.byID {
		if k.want[id] == nil {
			t.Errorf("a record of unknown id %q: %.200s", id, c.byID[id][0].Value)
		}
	}
	lost, dup, wrong := 0, 0, 0
	for id, w := range k.want {
		recs := c.byID[id]
		switch {
		case len(recs) == 0:
			lost++
			continue
		case len(recs) > 1:
			dup += len(recs) - 1
		}
		if msg := checkKubeRecord(recs[0], w); msg != "" {
			if wrong++; wrong <= 10 {
				t.Errorf("line %s (%s/%s %s): %s", id, w.ns, w.pod, w.stream, msg)
			}
		}
	}
	if lost > 0 || dup > 0 || wrong > 0 {
		t.Errorf("of %d lines: %d lost, %d duplicated, %d records not as written", len(k.want), lost, dup, wrong)
	} else {
		t.Logf("%d lines, each one record as written, in its namespace's topic", len(k.want))
	}
}

// checkKubeRecord returns what is wrong with r, the record of w, or "".
func checkKubeRecord(r *kgo.Record, w *kubeLine) string {
	var v map[string]any
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return fmt.Sprintf("value is not JSON (%v): %.200s", err, r.Value)
	}
	var bad []string
	if r.Topic != w.topic {
		bad = append(bad, fmt.Sprintf("in topic %s, want %s", r.Topic, w.topic))
	}
	if got, _ := v["message"].(string); got != w.message {
		bad = append(bad, fmt.Sprintf("message of %d bytes %.80q, want %d bytes %.80q", len(got), got, len(w.message), w.message))
	}
	ms := w.time.Truncate(time.Millisecond)
	if got, want := v["@timestamp"], ms.UTC().Format("2006-01-02T15:04:05.000Z"); got != want {
		bad = append(bad, fmt.Sprintf("@timestamp %v, want the runtime's %s", got, want))
	}
	if !r.Timestamp.Equal(ms) {
		bad = append(bad, fmt.Sprintf("CreateTime %v, want the runtime's %v", r.Timestamp.UTC(), ms.UTC()))
	}
	for field, want := range map[string]string{
		"kubernetes.namespace": w.ns, "kubernetes.pod.name": w.pod, "kubernetes.pod.uid": w.uid,
		"kubernetes.container.name": w.container, "container.id": w.containerID, "stream": w.stream,
		"log.file.path": w.path,
	} {
		if got, _ := v[field].(string); got != want {
			bad = append(bad, fmt.Sprintf("%s %q, want %q", field, got, want))
		}
	}
	if got := headers(r)["restart"]; got != w.restart {
		bad = append(bad, fmt.Sprintf("restart header %q, want %q", got, w.restart))
	}
	return strings.Join(bad, "; ")
}
