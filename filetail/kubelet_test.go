package filetail

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// kubeletLink makes dir/pods/ns_pod_uid/c/0.log and the link dir/containers/pod_ns_c-id.log to
// it, as the kubelet lays them out, and returns the link and the file.
func kubeletLink(t *testing.T, dir string) (link, file string) {
	t.Helper()
	file = filepath.Join(dir, "pods", "ns_pod_uid", "c", "0.log")
	link = filepath.Join(dir, "containers", "pod_ns_c-id.log")
	for _, d := range []string{filepath.Dir(file), filepath.Dir(link)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeLog(t, file, "")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	return link, file
}

// kubeletRotate renames file to file.<n> and creates a new file, as the kubelet and the runtime
// rotate a container's log: the link keeps its name and points to the new file.
func kubeletRotate(t *testing.T, file string, n int) {
	t.Helper()
	if err := os.Rename(file, file+"."+string(rune('0'+n))); err != nil {
		t.Fatal(err)
	}
	writeLog(t, file, "")
}

// The kubelet rotates in the pods directory, where the followed link does not live: the watch of
// the link's target directory sees it at once, with no scan for an hour.
func TestTailerKubeletRotationSeenByTheWatch(t *testing.T) {
	dir := t.TempDir()
	link, file := kubeletLink(t, dir)
	cfg := testConfig(filepath.Join(dir, "state"), filepath.Join(dir, "containers", "*.log"))
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	appendLog(t, file, "a\n")
	waitFor(t, "a", func() bool { return r.count() == 1 })
	rt.stop(t)

	cfg.RescanInterval = time.Hour // the first scan starts the link's follower; the watch does the rest
	r = &recorder{}
	rt = startTailer(t, cfg, r)
	appendLog(t, file, "b\n")
	waitFor(t, "b", func() bool { return r.count() == 1 })
	for n := 1; n <= 3; n++ {
		appendLog(t, file, "before "+string(rune('0'+n))+"\n")
		kubeletRotate(t, file, n)
		appendLog(t, file, "after "+string(rune('0'+n))+"\n")
		want := 1 + 2*n
		deadline := time.Now().Add(10 * time.Second)
		for r.count() < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if r.count() < want {
			t.Fatalf("rotation %d: %d lines after 10 s, want %d: the new 0.log behind the link was not seen (%q)", n, r.count(), want, r.data())
		}
	}
	rt.stopOK(t)
	equalLines(t, r.data(), []string{"b", "before 1", "after 1", "before 2", "after 2", "before 3", "after 3"})
	_ = link
}

// A rotation while the agent is stopped: the checkpoint names the link, and the renamed file is in
// the link's target directory. It is found there and read from its checkpoint to its end, then
// the new file from its start: nothing lost.
func TestTailerKubeletRotatedWhileStopped(t *testing.T) {
	dir := t.TempDir()
	_, file := kubeletLink(t, dir)
	cfg := testConfig(filepath.Join(dir, "state"), filepath.Join(dir, "containers", "*.log"))
	appendLog(t, file, "a\n")
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitFor(t, "a committed", func() bool { return r.count() == 1 && len(rt.Stats().Files) == 1 && rt.Stats().Files[0].Committed == 2 })
	rt.stopOK(t)

	appendLog(t, file, "b\n") // written while stopped, then rotated
	kubeletRotate(t, file, 1)
	appendLog(t, file, "c\n")
	cfg.StartAt = StartAtEnd
	r = &recorder{}
	rt = startTailer(t, cfg, r)
	waitFor(t, "b and c", func() bool { return r.count() == 2 })
	rt.stopOK(t)
	equalLines(t, r.data(), []string{"b", "c"})
}

// What --container-format auto decided for a file is kept in its checkpoint: a restart decodes
// the file the same way, whatever the first line after the checkpoint looks like (here a line
// that, read fresh, would decide docker).
func TestTailerAutoDecisionKeptInCheckpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.log")
	state := filepath.Join(dir, "state")
	cfg := testConfig(state, file)
	cfg.ContainerFormat = ContainerAuto
	writeLog(t, file, "2026-12-03T10:00:00.1Z stdout F one\n")
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	waitFor(t, "one committed", func() bool {
		st := rt.Stats()
		return r.count() == 1 && len(st.Files) == 1 && st.Files[0].Committed > 0
	})
	rt.stopOK(t)
	_, entries, err := openCheckpointStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].ContainerFormat != ContainerCRI {
		t.Fatalf("checkpoint %+v, want the file's entry with container_format cri", entries)
	}

	docker := `{"log":"two\n","stream":"stdout","time":"2026-12-03T10:00:01Z"}`
	appendLog(t, file, docker+"\n")
	r = &recorder{}
	rt = startTailer(t, cfg, r)
	waitFor(t, "the line after the checkpoint", func() bool { return r.count() == 1 })
	if f := rt.Stats().Files[0].Container.Format; f != ContainerCRI {
		t.Errorf("after the restart the file is read as %q, want cri", f)
	}
	rt.stopOK(t)
	equalLines(t, r.data(), []string{docker}) // not in the file's format: as it is
}

// A link that dangles for a while between the kubelet's rename and the runtime's create: the
// rename's event makes a scan while the link points at nothing, and the target's directory
// must stay watched through it, or the create that ends the gap is never seen (there is no
// scan for an hour here).
func TestTailerKubeletLinkDanglingBetweenRenameAndCreate(t *testing.T) {
	dir := t.TempDir()
	_, file := kubeletLink(t, dir)
	cfg := testConfig(filepath.Join(dir, "state"), filepath.Join(dir, "containers", "*.log"))
	cfg.RescanInterval = time.Hour // the first scan starts the link's follower; the watch does the rest
	r := &recorder{}
	rt := startTailer(t, cfg, r)
	appendLog(t, file, "a\n")
	waitFor(t, "a", func() bool { return r.count() == 1 })
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	// The gap: long enough for the rename's event and the scan it makes to run while the link
	// dangles (a real runtime creates the new file at once; the race is the same, only rarer).
	time.Sleep(300 * time.Millisecond)
	writeLog(t, file, "b\n")
	deadline := time.Now().Add(10 * time.Second)
	for r.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r.count() < 2 {
		t.Fatalf("the new file behind the link was not seen within 10 s (%q)", r.data())
	}
	rt.stopOK(t)
	equalLines(t, r.data(), []string{"a", "b"})
}
