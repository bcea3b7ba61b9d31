package release

// The install tests: what `make test-release` (scripts/release-test.sh) runs against the
// artifacts `make release` wrote and the broker scripts/kafka/with-broker.sh started. They
// install the .deb on this machine and run the image's binary in a chroot, as root, so they
// skip unless KAFKATRAIL_RELEASE_TEST=1; they refuse to start if anything of the package is
// already on the machine, and leave nothing behind (dpkg --purge, the user, every process by
// its PID).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// releaseEnv is what an install test works with.
type releaseEnv struct {
	dist      string
	meta      Metadata
	bootstrap string
	arch      string // this machine's, which the tests install and run
}

func releaseTest(t *testing.T, tools ...string) releaseEnv {
	t.Helper()
	if os.Getenv("KAFKATRAIL_RELEASE_TEST") != "1" {
		t.Skip("installs the .deb and runs the agent as root against a broker: make test-release (scripts/release-test.sh)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: dpkg -i, chroot, files owned by other users")
	}
	if !slices.Contains(Arches, runtime.GOARCH) || runtime.GOOS != "linux" {
		t.Fatalf("this machine is %s/%s: the release has linux %v", runtime.GOOS, runtime.GOARCH, Arches)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run scripts/deps.sh", tool)
		}
	}
	e := releaseEnv{dist: os.Getenv("KAFKATRAIL_DIST"), bootstrap: os.Getenv("KAFKA_BOOTSTRAP"), arch: runtime.GOARCH}
	if e.dist == "" {
		e.dist = filepath.Join(repoDir(t), "dist")
	}
	if e.bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run under scripts/kafka/with-broker.sh (make test-release does)")
	}
	e.meta = readMetadata(t, e.dist)
	return e
}

// TestArtifacts checks the files of dist/ without installing anything: SHA256SUMS, the
// tarballs' contents, each binary's architecture, version and build settings.
func TestArtifacts(t *testing.T) {
	e := releaseTest(t, "go", "dpkg-deb")
	sums, err := os.ReadFile(filepath.Join(e.dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.Lines(string(sums)) {
		sum, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		listed = append(listed, name)
		got, _, err := fileSHA256(filepath.Join(e.dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, sum)
		}
	}
	want := []string{ImageArchiveName(e.meta.Version), ChartArchiveName(e.meta.Version)}
	for _, a := range Arches {
		want = append(want, tarballName(e.meta.Version, a), packageName(FormatDeb, e.meta.Version, a), packageName(FormatRPM, e.meta.Version, a))
	}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %v, want %v", listed, want)
	}

	changelog := gitShow(t, e.meta.Commit, "CHANGELOG.md") != nil
	for _, arch := range Arches {
		name := tarballName(e.meta.Version, arch)
		top := strings.TrimSuffix(name, ".tar.gz") + "/"
		dir := t.TempDir()
		run(t, "tar", "-xzf", filepath.Join(e.dist, name), "-C", dir)
		entries := run(t, "tar", "-tzvf", filepath.Join(e.dist, name))
		wantFiles := []string{"", PackageName, "LICENSE", "README.md", "configs/", "configs/agent.yaml", "configs/kafkatrail-agent.service"}
		if changelog {
			wantFiles = append(wantFiles, "CHANGELOG.md")
		}
		var got []string
		for line := range strings.Lines(entries) {
			f := strings.Fields(line)
			// Owners 0/0 and the commit's time on every entry.
			if len(f) < 6 || f[1] != "0/0" || f[3]+" "+f[4] != time.Unix(e.meta.SourceDateEpoch, 0).Local().Format("2006-01-02 15:04") {
				t.Errorf("%s: entry %q", name, strings.TrimSpace(line))
				continue
			}
			got = append(got, strings.TrimPrefix(f[5], top))
		}
		slices.Sort(got)
		slices.Sort(wantFiles)
		if !slices.Equal(got, wantFiles) {
			t.Errorf("%s holds %q, want %q", name, got, wantFiles)
		}
		checkBinary(t, e, filepath.Join(dir, top, PackageName), arch)

		// The deb of each arch, unpacked without installing.
		deb := filepath.Join(e.dist, packageName(FormatDeb, e.meta.Version, arch))
		if a := strings.TrimSpace(run(t, "dpkg-deb", "--field", deb, "Architecture")); a != arch {
			t.Errorf("%s: Architecture %s", deb, a)
		}
		x := t.TempDir()
		run(t, "dpkg-deb", "-x", deb, x)
		checkBinary(t, e, filepath.Join(x, BinPath), arch)
	}
}

// checkBinary: the right machine, static, and the host's runs and prints the release's
// version; `go version -m` shows the release's build settings.
func checkBinary(t *testing.T, e releaseEnv, path, arch string) {
	t.Helper()
	if err := checkStatic(path, arch); err != nil {
		t.Error(err)
	}
	if arch == e.arch {
		if got := strings.TrimSpace(run(t, path, "--version")); got != e.meta.VersionLine {
			t.Errorf("%s --version: %q, want %q", path, got, e.meta.VersionLine)
		}
	}
	m := run(t, "go", "version", "-m", path)
	for _, want := range []string{
		"\tbuild\t-trimpath=true\n", "\tbuild\tCGO_ENABLED=0\n", "\tbuild\tGOARCH=" + arch + "\n",
		// The clean clone's VCS stamp (go omits -ldflags under -trimpath: --version checks those).
		"\tbuild\tvcs=git\n", "\tbuild\tvcs.revision=" + e.meta.Commit + "\n", "\tbuild\tvcs.modified=false\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("%s: go version -m lacks %q:\n%s", path, want, m)
		}
	}
}

// TestRPM reads the .rpm of each arch with rpm itself (this is a Debian machine: the rpm is
// queried and unpacked, not installed).
func TestRPM(t *testing.T) {
	e := releaseTest(t, "rpm", "rpm2archive", "tar")
	for _, arch := range Arches {
		t.Run(arch, func(t *testing.T) {
			p := filepath.Join(e.dist, packageName(FormatRPM, e.meta.Version, arch))
			rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
			info := run(t, "rpm", "-qip", p)
			for _, want := range []string{
				"Name        : " + PackageName + "\n", "Version     : " + e.meta.Version + "\n", "Release     : 1\n",
				"Architecture: " + rpmArch + "\n", "License     : " + License + "\n", "URL         : " + Homepage + "\n",
				"Vendor      : " + Vendor + "\n", "Packager    : " + Maintainer + "\n", "Build Host  : localhost\n",
			} {
				if !strings.Contains(info, want) {
					t.Errorf("rpm -qip lacks %q:\n%s", want, info)
				}
			}
			if bt := strings.TrimSpace(run(t, "rpm", "-qp", "--qf", "%{BUILDTIME}", p)); bt != strconv.FormatInt(e.meta.SourceDateEpoch, 10) {
				t.Errorf("BUILDTIME %s, want SOURCE_DATE_EPOCH %d", bt, e.meta.SourceDateEpoch)
			}
			files := strings.Fields(run(t, "rpm", "-qlp", p))
			want := []string{"/etc/kafkatrail", ConfigPath, BinPath, UnitPath, DocDir + "/LICENSE", DocDir + "/README.md", DocDir + "/agent-help.txt", ManPath}
			if gitShow(t, e.meta.Commit, "CHANGELOG.md") != nil {
				want = append(want, DocDir+"/CHANGELOG.md")
			}
			slices.Sort(want)
			if !slices.Equal(files, want) {
				t.Errorf("rpm -qlp: %q, want %q", files, want)
			}
			if c := strings.TrimSpace(run(t, "rpm", "-qcp", p)); c != ConfigPath {
				t.Errorf("rpm -qcp (config files): %q, want %s alone", c, ConfigPath)
			}
			flags := run(t, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", p)
			if !strings.Contains(flags, ConfigPath+" cn\n") {
				t.Errorf("%s is not %%config(noreplace) (flags cn):\n%s", ConfigPath, flags)
			}
			scripts := run(t, "rpm", "-qp", "--scripts", p)
			for _, want := range []string{"preinstall scriptlet", "useradd --system", "postinstall scriptlet", "install -d -m 0750 -o kafkatrail", "preuninstall scriptlet", "postuninstall scriptlet"} {
				if !strings.Contains(scripts, want) {
					t.Errorf("rpm --scripts lacks %q:\n%s", want, scripts)
				}
			}
			// A file, not shadow-utils: SUSE's useradd is in shadow.
			if req := run(t, "rpm", "-qpR", p); !strings.Contains(req, "/usr/sbin/useradd\n") || strings.Contains(req, "shadow-utils") {
				t.Errorf("rpm -qpR: want /usr/sbin/useradd, not shadow-utils:\n%s", req)
			}
			modes := run(t, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME}\n]", p)
			if want := ConfigPath + " -rw-r----- root:" + ServiceUser + "\n"; !strings.Contains(modes, want) {
				t.Errorf("rpm file modes lack %q:\n%s", want, modes)
			}
			if k := run(t, "rpm", "-K", "--nosignature", p); !strings.Contains(k, "digests OK") {
				t.Errorf("rpm -K: %s", k)
			}
			dir := t.TempDir()
			sh(t, dir, "rpm2archive - <"+p+" | tar -xzf -")
			checkBinary(t, e, filepath.Join(dir, BinPath), arch)
			unit, err := os.ReadFile(filepath.Join(dir, UnitPath))
			if err != nil || !bytes.Contains(unit, []byte("\nUser=kafkatrail\n")) || !bytes.Contains(unit, []byte("\nEnvironmentFile=-/etc/sysconfig/kafkatrail-agent\n")) {
				t.Errorf("the rpm's unit (%v):\n%s", err, unit)
			}
		})
	}
}

// TestDeb installs the .deb, ships lines with the installed agent as its unit would run it,
// upgrades to a higher version keeping a changed agent.yaml and the checkpoints, removes and
// purges it.
func TestDeb(t *testing.T) {
	e := releaseTest(t, "dpkg", "dpkg-query", "getent", "id")
	ctx := context.Background()
	deb := filepath.Join(e.dist, packageName(FormatDeb, e.meta.Version, e.arch))
	if s := debStatus(); s != "not-installed" {
		t.Fatalf("%s is already on this machine (%s): the test would change it", PackageName, s)
	}
	for _, p := range []string{BinPath, "/etc/kafkatrail", StateDir} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists: the test would change it", p)
		}
	}
	if _, err := user.Lookup(ServiceUser); err == nil {
		t.Fatalf("the user %s exists: the test would remove it", ServiceUser)
	}
	if _, err := user.LookupGroup(ServiceUser); err == nil {
		t.Fatalf("the group %s exists: the test would remove it", ServiceUser)
	}
	// Whatever step fails, the machine as it was: none of these existed (checked above).
	t.Cleanup(func() {
		if debStatus() != "not-installed" {
			if out, err := exec.Command("dpkg", "--purge", PackageName).CombinedOutput(); err != nil {
				t.Errorf("cleanup: dpkg --purge: %v\n%s", err, out)
			}
		}
		if _, err := user.Lookup(ServiceUser); err == nil {
			exec.Command("userdel", ServiceUser).Run()
		}
		if _, err := user.LookupGroup(ServiceUser); err == nil {
			exec.Command("groupdel", ServiceUser).Run()
		}
		os.RemoveAll("/etc/kafkatrail")
		os.RemoveAll(StateDir)
	})

	// The upgrade's package first: the same commit as the next patch version.
	next := nextPatch(t, e.meta.Version)
	upDist := filepath.Join(t.TempDir(), "dist")
	if _, err := Build(ctx, Options{
		Repo: repoDir(t), Rev: e.meta.Commit, Out: upDist, Version: next, SourceDateEpoch: e.meta.SourceDateEpoch,
		Arches: []string{e.arch}, Formats: []string{FormatDeb}, Log: testLog{t},
	}); err != nil {
		t.Fatal(err)
	}
	upDeb := filepath.Join(upDist, packageName(FormatDeb, next, e.arch))

	logs := logDir(t)
	logFile := filepath.Join(logs, "app.log")
	topic := newTopic(t, e.bootstrap)
	var lines []string

	step(t, "install", func(t *testing.T) {
		run(t, "dpkg", "--install", deb)
		if s, v := debStatus(), debVersion(); s != "installed" || v != e.meta.Version+"-1" {
			t.Fatalf("dpkg says %s %s", s, v)
		}
		if got := strings.TrimSpace(run(t, BinPath, "--version")); got != e.meta.VersionLine {
			t.Errorf("%s --version: %q, want %q", BinPath, got, e.meta.VersionLine)
		}
		pw := strings.Split(strings.TrimSpace(run(t, "getent", "passwd", ServiceUser)), ":")
		if uid, _ := strconv.Atoi(pw[2]); len(pw) != 7 || uid >= 1000 || pw[5] != StateDir || pw[6] != "/usr/sbin/nologin" {
			t.Errorf("passwd entry %q: want a system user, home %s, no login", pw, StateDir)
		}
		groups := strings.Fields(run(t, "id", "-nG", ServiceUser))
		if !slices.Contains(groups, ServiceUser) || !slices.Contains(groups, "adm") {
			t.Errorf("%s is in %v, want %s and adm", ServiceUser, groups, ServiceUser)
		}
		checkOwner(t, StateDir, ServiceUser, 0o750|fs.ModeDir)
		listed := run(t, "dpkg", "--listfiles", PackageName)
		for _, p := range []string{BinPath, UnitPath, ConfigPath, ManPath, DocDir + "/README.md", DocDir + "/LICENSE", DocDir + "/agent-help.txt"} {
			if !strings.Contains(listed, p+"\n") {
				t.Errorf("dpkg -L lacks %s", p)
			}
		}
		if c := run(t, "dpkg-query", "-W", "-f=${Conffiles}", PackageName); !strings.Contains(c, ConfigPath+" ") {
			t.Errorf("conffiles: %q, want %s", c, ConfigPath)
		}
		if got, want := readFile(t, ConfigPath), gitShow(t, e.meta.Commit, "configs/agent.yaml"); !bytes.Equal(got, want) {
			t.Errorf("%s is not configs/agent.yaml", ConfigPath)
		}
		// It may hold a SASL password: the service's group reads it, nobody else.
		checkOwnerGroup(t, ConfigPath, "root", ServiceUser, 0o640)
		if help := readFile(t, DocDir+"/agent-help.txt"); !bytes.Contains(help, []byte("--brokers")) {
			t.Errorf("agent-help.txt:\n%s", help)
		}
		zr, err := gzip.NewReader(bytes.NewReader(readFile(t, ManPath)))
		if err != nil {
			t.Fatal(err)
		}
		if man, _ := io.ReadAll(zr); !bytes.HasPrefix(man, []byte(".TH KAFKATRAIL-AGENT 1")) || !bytes.Contains(man, []byte(`\-\-brokers`)) {
			t.Errorf("%s:\n%s", ManPath, man)
		}
		if _, err := exec.LookPath("systemd-analyze"); err == nil {
			// Offline: the unit's syntax, its binary, its user.
			run(t, "systemd-analyze", "verify", UnitPath)
		}
		u := readUnit(t)
		agentCmd(t, u, "check", "--config", ConfigPath).mustRun(t)
	})

	step(t, "ship", func(t *testing.T) {
		lines = appendLines(t, logFile, "before the upgrade", 1000)
		admOnly(t, logFile)
		// The secrets as the README says to keep them: in the environment file the unit
		// reads, not in agent.yaml; the agent logs in with them on the SASL listener.
		saslBootstrap, saslUser, saslPassword := os.Getenv("KAFKA_SASL_BOOTSTRAP"), os.Getenv("KAFKA_SASL_USER"), os.Getenv("KAFKA_SASL_PASSWORD")
		if saslBootstrap == "" || saslUser == "" || saslPassword == "" {
			t.Fatal("KAFKA_SASL_BOOTSTRAP, KAFKA_SASL_USER, KAFKA_SASL_PASSWORD: not set (scripts/kafka/with-broker.sh sets them)")
		}
		envFile := EnvironmentFile(FormatDeb)
		secrets := "# kafkatrail-agent's secrets\nKAFKATRAIL_PRODUCER_SECURITY_PROTOCOL=SASL_PLAINTEXT\n" +
			"KAFKATRAIL_PRODUCER_SASL_MECHANISM=PLAIN\nKAFKATRAIL_PRODUCER_SASL_USERNAME=" + saslUser + "\n" +
			"KAFKATRAIL_PRODUCER_SASL_PASSWORD=\"" + saslPassword + "\"\n"
		if err := os.WriteFile(envFile, []byte(secrets), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(envFile)
		a := startInstalledOn(t, saslBootstrap, topic, logFile)
		consume(t, e.bootstrap, topic, lines)
		a.stop(t)
		checkOwner(t, StateDir+"/checkpoints.json", ServiceUser, 0)
	})

	// The unit's SystemCallFilter= cannot be tried without a running systemd: strace records
	// every system call of the installed agent run as the unit runs it (tailing, sending,
	// serving its page, answering `health`), and each must be one the filter allows.
	step(t, "system calls within the unit filter", func(t *testing.T) {
		strace, err := exec.LookPath("strace")
		if err != nil {
			t.Fatal("strace not found: run scripts/deps.sh")
		}
		allowed, denied := unitSyscallFilter(t, readFile(t, UnitPath))
		dir, err := os.MkdirTemp("", "kafkatrail-strace-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		usr, err := user.Lookup(ServiceUser)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(atou(t, usr.Uid)), int(atou(t, usr.Gid))); err != nil {
			t.Fatal(err)
		}
		traced := filepath.Join(logs, "traced.log")
		want := appendLines(t, traced, "traced", 500)
		admOnly(t, traced)
		topic := newTopic(t, e.bootstrap)
		port := freePort(t)
		u := readUnit(t)
		a := agentCmd(t, u, "--brokers", e.bootstrap, "--topic", topic, "--tail", traced, "--start-at", "beginning",
			"--state-dir", filepath.Join(dir, "state"), "--http", "127.0.0.1:"+port, "--log-format", "json")
		trace := filepath.Join(dir, "trace")
		a.cmd.Path, a.cmd.Args = strace, append([]string{strace, "-f", "-qq", "-o", trace}, a.cmd.Args...)
		a.start(t)
		a.waitHealthy(t, port)
		consume(t, e.bootstrap, topic, want)
		health := agentCmd(t, u, "health", "--http", "127.0.0.1:"+port)
		health.cmd.Path, health.cmd.Args = strace, append([]string{strace, "-f", "-qq", "-o", trace + ".health"}, health.cmd.Args...)
		health.mustRun(t)
		// SIGTERM to the agent, not to strace (which would detach and leave it running);
		// strace exits with the agent's status.
		a.stopPID(t, childPID(t, a.cmd.Process.Pid))
		used := map[string]bool{}
		for _, f := range []string{trace, trace + ".health"} {
			for _, l := range strings.Split(string(readFile(t, f)), "\n") {
				if m := straceCall.FindStringSubmatch(l); m != nil {
					used[m[1]] = true
				}
			}
		}
		if len(used) < 20 {
			t.Fatalf("strace saw %d system calls: not a trace of the agent", len(used))
		}
		var outside []string
		for c := range used {
			if !allowed[c] || denied[c] {
				outside = append(outside, c)
			}
		}
		slices.Sort(outside)
		t.Logf("%d system calls, all within the unit's filter: %v", len(used), len(outside) == 0)
		if len(outside) > 0 {
			t.Errorf("system calls the unit's SystemCallFilter= refuses (EPERM): %v", outside)
		}
	})

	step(t, "upgrade keeps the changed config and the checkpoints", func(t *testing.T) {
		changed := append(readFile(t, ConfigPath), "# changed by the release install test\n"...)
		if err := os.WriteFile(ConfigPath, changed, 0o644); err != nil {
			t.Fatal(err)
		}
		checkpoints := readFile(t, StateDir+"/checkpoints.json")
		cmd := exec.Command("dpkg", "--install", upDeb)
		cmd.Stdin = nil // no terminal: a conffile question would fail the install
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dpkg --install %s: %v\n%s", upDeb, err, out)
		}
		if v := debVersion(); v != next+"-1" {
			t.Errorf("after the upgrade dpkg says %s, want %s-1", v, next)
		}
		if got := run(t, BinPath, "--version"); !strings.HasPrefix(got, "kafkatrail agent "+next+" (commit "+e.meta.Commit[:12]) {
			t.Errorf("upgraded --version: %q", got)
		}
		if got := readFile(t, ConfigPath); !bytes.Equal(got, changed) {
			t.Errorf("the upgrade replaced the changed %s:\n%s", ConfigPath, got)
		}
		for _, suffix := range []string{".dpkg-dist", ".dpkg-new", ".dpkg-old"} {
			if _, err := os.Stat(ConfigPath + suffix); err == nil {
				t.Errorf("%s%s left by the upgrade", ConfigPath, suffix)
			}
		}
		if got := readFile(t, StateDir+"/checkpoints.json"); !bytes.Equal(got, checkpoints) {
			t.Error("the upgrade changed the checkpoints")
		}
		// The upgraded agent resumes where the old one stopped: the new lines, none again.
		more := appendLines(t, logFile, "after the upgrade", 200)
		lines = append(lines, more...)
		a := startInstalled(t, e, topic, logFile)
		consume(t, e.bootstrap, topic, lines)
		a.stop(t)
	})

	step(t, "remove leaves config, state and user", func(t *testing.T) {
		run(t, "dpkg", "--remove", PackageName)
		if s := debStatus(); s != "config-files" {
			t.Errorf("after dpkg -r: %s, want config-files", s)
		}
		for _, p := range []string{BinPath, UnitPath, ManPath, DocDir} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s left after dpkg -r", p)
			}
		}
		if !bytes.Contains(readFile(t, ConfigPath), []byte("# changed by the release install test")) {
			t.Errorf("%s changed by dpkg -r", ConfigPath)
		}
		checkOwner(t, StateDir+"/checkpoints.json", ServiceUser, 0)
	})

	step(t, "purge removes config, state and user", func(t *testing.T) {
		run(t, "dpkg", "--purge", PackageName)
		if s := debStatus(); s != "not-installed" {
			t.Errorf("after dpkg -P: %s", s)
		}
		for _, p := range []string{"/etc/kafkatrail", StateDir} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s left after dpkg -P", p)
			}
		}
		if _, err := user.Lookup(ServiceUser); err == nil {
			t.Errorf("the user %s left after dpkg -P", ServiceUser)
		}
		if _, err := user.LookupGroup(ServiceUser); err == nil {
			t.Errorf("the group %s left after dpkg -P", ServiceUser)
		}
	})
}

// startInstalled runs the installed agent as its unit would: the unit's ExecStart,
// Environment, User, Group and SupplementaryGroups, plus what systemd sets (STATE_DIRECTORY,
// HOME), and flags for the test's broker, topic and file, and the page on a free port.
func startInstalled(t *testing.T, e releaseEnv, topic, logFile string) *agentProc {
	t.Helper()
	return startInstalledOn(t, e.bootstrap, topic, logFile)
}

// startInstalledOn is startInstalled with the brokers at bootstrap.
func startInstalledOn(t *testing.T, bootstrap, topic, logFile string) *agentProc {
	t.Helper()
	u := readUnit(t)
	port := freePort(t)
	a := agentCmd(t, u, "--brokers", bootstrap, "--topic", topic, "--tail", logFile,
		"--start-at", "beginning", "--http", "127.0.0.1:"+port, "--log-format", "json").start(t)
	a.waitHealthy(t, port)
	return a
}

// unit is what the test reads of the installed systemd unit.
type unit struct {
	execStart []string
	env       []string
	envFiles  []string // EnvironmentFile=: a leading '-' when it may be missing
	user      string
	group     string
	groups    []string
}

func readUnit(t *testing.T) unit {
	t.Helper()
	var u unit
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, UnitPath)))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "ExecStart":
			u.execStart = strings.Fields(v)
		case "Environment":
			u.env = append(u.env, v)
		case "EnvironmentFile":
			u.envFiles = append(u.envFiles, v)
		case "User":
			u.user = v
		case "Group":
			u.group = v
		case "SupplementaryGroups":
			u.groups = strings.Fields(v)
		}
	}
	if len(u.execStart) == 0 || u.user != ServiceUser || u.group != ServiceUser || !slices.Contains(u.groups, "adm") {
		t.Fatalf("the installed unit: %+v", u)
	}
	return u
}

// agentCmd is the unit's command with args appended (or, for check and health, instead of its
// own).
func agentCmd(t *testing.T, u unit, args ...string) *agentProc {
	t.Helper()
	argv := append(slices.Clone(u.execStart), args...)
	if len(args) > 0 && (args[0] == "check" || args[0] == "health") {
		argv = append([]string{u.execStart[0]}, args...)
	}
	usr, err := user.Lookup(u.user)
	if err != nil {
		t.Fatal(err)
	}
	grp, err := user.LookupGroup(u.group)
	if err != nil {
		t.Fatal(err)
	}
	cred := &syscall.Credential{Uid: atou(t, usr.Uid), Gid: atou(t, grp.Gid)}
	for _, g := range u.groups {
		sg, err := user.LookupGroup(g)
		if err != nil {
			t.Fatal(err)
		}
		cred.Groups = append(cred.Groups, atou(t, sg.Gid))
	}
	env := append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + usr.HomeDir, "USER=" + u.user, "STATE_DIRECTORY=" + StateDir}, u.env...)
	for _, f := range u.envFiles {
		env = append(env, readEnvironmentFile(t, f)...)
	}
	return newAgentProc(argv, env, cred)
}

// readEnvironmentFile reads an EnvironmentFile= as systemd does (as root, before the service's
// user takes over): KEY=VALUE lines, '#' and ';' comments, a value in double quotes unquoted.
// A name with a leading '-' may be missing.
func readEnvironmentFile(t *testing.T, name string) []string {
	t.Helper()
	optional := strings.HasPrefix(name, "-")
	b, err := os.ReadFile(strings.TrimPrefix(name, "-"))
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", name, l)
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		env = append(env, strings.TrimSpace(k)+"="+v)
	}
	return env
}

// TestImage inspects the OCI image with skopeo (layout and archive), unpacks this machine's
// platform with umoci and runs it in a chroot as the image's user: its version, then lines
// shipped to the broker from a file inside the rootfs with the image's own configuration.
func TestImage(t *testing.T) {
	e := releaseTest(t, "skopeo", "umoci", "chroot")
	im := e.meta.Image
	if im == nil {
		t.Fatal("metadata.json: no image")
	}
	layoutRef := "oci:" + filepath.Join(e.dist, im.Layout) + ":"
	archive := "oci-archive:" + filepath.Join(e.dist, im.Archive)

	raw := run(t, "skopeo", "inspect", "--raw", layoutRef+im.Tag)
	if sum := sha256.Sum256([]byte(raw)); "sha256:"+hex.EncodeToString(sum[:]) != im.IndexDigest {
		t.Errorf("skopeo reads index sha256:%x from the layout, metadata.json says %s", sum, im.IndexDigest)
	}
	var index struct {
		MediaType string `json:"mediaType"`
		Manifests []struct {
			Digest   string `json:"digest"`
			Platform struct {
				OS, Architecture, Variant string
			} `json:"platform"`
		} `json:"manifests"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal([]byte(raw), &index); err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range index.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if index.MediaType != "application/vnd.oci.image.index.v1+json" || strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("index %s with %v, want an OCI index of linux/amd64 and linux/arm64", index.MediaType, platforms)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.version":  e.meta.Version,
		"org.opencontainers.image.revision": e.meta.Commit,
		"org.opencontainers.image.source":   Homepage,
		"org.opencontainers.image.licenses": License,
		"org.opencontainers.image.title":    PackageName,
		"org.opencontainers.image.created":  e.meta.Date,
	}
	for k, v := range wantLabels {
		if index.Annotations[k] != v {
			t.Errorf("index annotation %s=%q, want %q", k, index.Annotations[k], v)
		}
	}

	// The archive, as skopeo resolves it for each platform: labels, digest, config.
	for _, arch := range Arches {
		var insp struct {
			Digest       string
			Architecture string
			Os           string
			Created      time.Time
			Labels       map[string]string
		}
		mustJSON(t, run(t, "skopeo", "--override-arch", arch, "inspect", archive), &insp)
		// Digest is what a pull by tag resolves: the index.
		if insp.Architecture != arch || insp.Os != "linux" || insp.Digest != im.IndexDigest || insp.Created.Unix() != e.meta.SourceDateEpoch {
			t.Errorf("skopeo inspect --override-arch %s: %+v, want digest %s", arch, insp, im.IndexDigest)
		}
		for k, v := range wantLabels {
			if insp.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", arch, k, insp.Labels[k], v)
			}
		}
	}
	var cfg struct {
		Config struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			Env          []string
			ExposedPorts map[string]struct{}
			Healthcheck  struct{ Test []string }
		} `json:"config"`
	}
	// --raw: the blob as runtimes read it (skopeo's parsed form drops Docker's Healthcheck).
	mustJSON(t, run(t, "skopeo", "inspect", "--config", "--raw", layoutRef+PlatformTag(e.meta.Version, e.arch)), &cfg)
	c := cfg.Config
	_, exposed := c.ExposedPorts["8686/tcp"]
	if c.User != ImageUser || !slices.Equal(c.Entrypoint, []string{BinPath}) || !slices.Equal(c.Cmd, []string{"--config", ConfigPath}) ||
		!slices.Contains(c.Env, "KAFKATRAIL_HTTP="+ImageHTTP) || len(c.ExposedPorts) != 1 || !exposed ||
		!slices.Equal(c.Healthcheck.Test, []string{"CMD", BinPath, "health"}) {
		t.Errorf("image config %+v", c)
	}

	// skopeo copy takes the archive whole, and changes no digest.
	copied := filepath.Join(t.TempDir(), "copy")
	run(t, "skopeo", "copy", "--quiet", "--all", archive, "oci:"+copied+":"+im.Tag)
	if raw2 := run(t, "skopeo", "inspect", "--raw", "oci:"+copied+":"+im.Tag); raw2 != raw {
		t.Error("skopeo copy --all of the archive gave another index")
	}
	// What `podman load` does with the archive (c/image into c/storage), in a storage of the
	// test's own, not the machine's.
	store := t.TempDir()
	storage := "containers-storage:[vfs@" + store + "/root+" + store + "/run]" + im.Name
	run(t, "skopeo", "copy", "--quiet", "--insecure-policy", archive, storage)
	t.Cleanup(func() { unmountUnder(store) })
	var loaded struct{ Digest string }
	mustJSON(t, run(t, "skopeo", "inspect", storage), &loaded)
	for _, p := range im.Platforms {
		if strings.HasPrefix(p.Platform, "linux/"+e.arch) && loaded.Digest != p.Digest {
			t.Errorf("loaded into containers-storage: %s, want linux/%s's %s", loaded.Digest, e.arch, p.Digest)
		}
	}
	if podman, err := exec.LookPath("podman"); err == nil {
		t.Run("podman load", func(t *testing.T) {
			p := t.TempDir()
			out := run(t, podman, "--root", p+"/root", "--runroot", p+"/run", "--storage-driver", "vfs", "load", "--input", filepath.Join(e.dist, im.Archive))
			if !strings.Contains(out, "Loaded image: "+im.Name) {
				t.Errorf("podman load: %s", out)
			}
		})
	}

	// umoci unpacks one image (0.4 refuses a tag leading to several): this machine's.
	bundle := filepath.Join(t.TempDir(), "bundle")
	run(t, "umoci", "unpack", "--image", filepath.Join(e.dist, im.Layout)+":"+PlatformTag(e.meta.Version, e.arch), bundle)
	rootfs := filepath.Join(bundle, "rootfs")
	var spec struct {
		Process struct {
			User struct{ UID, GID uint32 } `json:"user"`
			Args []string                  `json:"args"`
			Env  []string                  `json:"env"`
		} `json:"process"`
	}
	mustJSON(t, string(readFile(t, filepath.Join(bundle, "config.json"))), &spec)
	if spec.Process.User.UID != ImageUID || spec.Process.User.GID != ImageUID {
		t.Errorf("the runtime spec's user %+v, want %d", spec.Process.User, ImageUID)
	}
	if !bytes.Contains(readFile(t, filepath.Join(rootfs, "etc/passwd")), fmt.Appendf(nil, "\n%s:x:%d:%d:", ServiceUser, ImageUID, ImageUID)) {
		t.Error("/etc/passwd lacks the image's user")
	}
	checkOwnerID(t, filepath.Join(rootfs, StateDir), ImageUID, 0o750|fs.ModeDir)
	checkOwnerID(t, filepath.Join(rootfs, BinPath), 0, 0o755)
	cas := readFile(t, filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"))
	if sum := sha256.Sum256(cas); hex.EncodeToString(sum[:]) != im.CACertificatesSHA256 || !bytes.Contains(cas, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Error("the image's CA bundle is not the one metadata.json names")
	}
	local, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	for _, l := range local {
		if bytes.Contains(cas, bytes.TrimSpace(readFile(t, l))) {
			t.Errorf("the image trusts this machine's own CA %s", l)
		}
	}
	if !bytes.Equal(readFile(t, filepath.Join(rootfs, ConfigPath)), gitShow(t, e.meta.Commit, "configs/agent.yaml")) {
		t.Errorf("the image's %s is not configs/agent.yaml", ConfigPath)
	}

	userspec := fmt.Sprintf("--userspec=%d:%d", spec.Process.User.UID, spec.Process.User.GID)
	if got := strings.TrimSpace(run(t, "chroot", userspec, rootfs, BinPath, "--version")); got != e.meta.VersionLine {
		t.Errorf("chroot: --version %q, want %q", got, e.meta.VersionLine)
	}

	// The image's own command and environment, as a runtime would start it; the broker, topic
	// and start position as flags, the page on 127.0.0.1 instead of all interfaces, and a file
	// where the image's agent.yaml tails (/var/log/app/*.log).
	topic := newTopic(t, e.bootstrap)
	if err := os.MkdirAll(filepath.Join(rootfs, "var/log/app"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines := appendLines(t, filepath.Join(rootfs, "var/log/app/release-test.log"), "in the image", 1000)
	port := freePort(t)
	env := slices.Clone(spec.Process.Env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "KAFKATRAIL_HTTP=") {
			env[i] = "KAFKATRAIL_HTTP=127.0.0.1:" + port
		}
	}
	argv := append([]string{"chroot", userspec, rootfs}, spec.Process.Args...)
	argv = append(argv, "--brokers", e.bootstrap, "--topic", topic, "--start-at", "beginning")
	a := newAgentProc(argv, env, nil).start(t)
	a.waitHealthy(t, port)
	// The image's HEALTHCHECK as the runtime runs it: its command, in the container's
	// environment, as its user.
	health := append([]string{"chroot", userspec, rootfs}, c.Healthcheck.Test[1:]...)
	newAgentProc(health, env, nil).mustRun(t)
	consume(t, e.bootstrap, topic, lines)
	a.stop(t)
	if err := newAgentProc(health, env, nil).cmd.Run(); err == nil {
		t.Error("the HEALTHCHECK passes with the agent stopped")
	}
	checkOwnerID(t, filepath.Join(rootfs, StateDir, "checkpoints.json"), ImageUID, 0)
}

// agentProc is an agent the test started, stopped by its PID.
type agentProc struct {
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{}
	err  error
}

func newAgentProc(argv, env []string, cred *syscall.Credential) *agentProc {
	a := &agentProc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	a.cmd.Env = env
	a.cmd.Dir = "/"
	a.cmd.Stdout, a.cmd.Stderr = &a.out, &a.out
	if cred != nil {
		a.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return a
}

func (a *agentProc) mustRun(t *testing.T) {
	t.Helper()
	if err := a.cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(a.cmd.Args, " "), err, a.out.String())
	}
}

func (a *agentProc) start(t *testing.T) *agentProc {
	t.Helper()
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			a.cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			t.Logf("%s:\n%s", strings.Join(a.cmd.Args, " "), a.out.String())
		}
	})
	return a
}

// waitHealthy waits for /healthz on port, or the agent's exit.
func (a *agentProc) waitHealthy(t *testing.T, port string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-a.done:
			t.Fatalf("the agent exited (%v) before /healthz answered:\n%s", a.err, a.out.String())
		default:
		}
		resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz on 127.0.0.1:%s: %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM (what systemd and container runtimes send) and wants a clean exit.
func (a *agentProc) stop(t *testing.T) {
	t.Helper()
	a.stopPID(t, a.cmd.Process.Pid)
}

// stopPID is stop with SIGTERM sent to pid: the agent when a.cmd runs it under another
// program (strace).
func (a *agentProc) stopPID(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
		t.Fatalf("the agent did not stop within 60 s of SIGTERM:\n%s", a.out.String())
	}
	if a.err != nil {
		t.Fatalf("the agent exited with %v:\n%s", a.err, a.out.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newTopic creates a one-partition topic (so that the lines come back in order), deleted
// at the end.
func newTopic(t *testing.T, bootstrap string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("release-test-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		cl.Close()
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm.DeleteTopics(ctx, topic)
		cl.Close()
	})
	return topic
}

// consume reads topic from its start and wants exactly want, in order: nothing lost, nothing
// twice.
func consume(t *testing.T, bootstrap, topic string, want []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	poll := func(d time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch %s: %v", topic, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		poll(time.Second)
	}
	poll(time.Second) // anything more would be a duplicate
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", topic, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d is %q, want %q", topic, i, got[i], want[i])
		}
	}
}

// logDir is a directory the service user can enter (t.TempDir's parent is root's only).
func logDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kafkatrail-release-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// appendLines appends n numbered lines to path (made 0644) and returns them.
func appendLines(t *testing.T, path, what string, n int) []string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := make([]string, n)
	w := bufio.NewWriter(f)
	for i := range lines {
		lines[i] = fmt.Sprintf("%s: line %06d of %d, kafkatrail release install test", what, i+1, n)
		w.WriteString(lines[i] + "\n")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// admOnly makes path root:adm 0640, as Debian's /var/log files are: readable through adm
// alone.
func admOnly(t *testing.T, path string) {
	t.Helper()
	adm, err := user.LookupGroup("adm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 0, int(atou(t, adm.Gid))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
}

// step runs a subtest and stops the test when it failed: the next steps build on it.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

func debStatus() string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", PackageName).Output()
	if err != nil || len(out) == 0 {
		return "not-installed" // dpkg has never heard of it
	}
	return string(out)
}

func debVersion() string {
	out, _ := exec.Command("dpkg-query", "-W", "-f=${Version}", PackageName).Output()
	return string(out)
}

func nextPatch(t *testing.T, v string) string {
	t.Helper()
	core, _, _ := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	p, err := strconv.Atoi(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s.%s.%d", parts[0], parts[1], p+1)
}

// childPID is the one child process of ppid (from /proc/PID/stat's fourth field).
func childPID(t *testing.T, ppid int) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			return pid
		}
	}
	t.Fatalf("process %d has no child", ppid)
	return 0
}

// straceCall reads the system call's name from a line of `strace -f -qq`: "PID name(" or
// "PID <... name resumed>".
var straceCall = regexp.MustCompile(`^\d+ +(?:<\.\.\. )?([a-z_0-9]+)(?:\(| resumed>)`)

// unitSyscallFilter reads a unit's SystemCallFilter= lines: the calls allowed (the union of the
// allow lists) and those denied (the union of the '~' lists), each group expanded by
// systemd-analyze syscall-filter.
func unitSyscallFilter(t *testing.T, unit []byte) (allowed, denied map[string]bool) {
	t.Helper()
	allowed, denied = map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(string(unit), "\n") {
		v, ok := strings.CutPrefix(l, "SystemCallFilter=")
		if !ok {
			continue
		}
		into := allowed
		if rest, deny := strings.CutPrefix(v, "~"); deny {
			into, v = denied, rest
		}
		for _, name := range strings.Fields(v) {
			for c := range syscallGroup(t, name, map[string]bool{}) {
				into[c] = true
			}
		}
	}
	if len(allowed) == 0 {
		t.Fatal("the unit has no SystemCallFilter= allow list")
	}
	return allowed, denied
}

// syscallGroup expands a system call or an @group of systemd's filter into system calls.
func syscallGroup(t *testing.T, name string, seen map[string]bool) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if !strings.HasPrefix(name, "@") {
		out[name] = true
		return out
	}
	if seen[name] {
		return out
	}
	seen[name] = true
	lines := strings.Split(run(t, "systemd-analyze", "syscall-filter", name), "\n")
	for _, l := range lines[1:] { // the first line is the group's name
		l, _, _ = strings.Cut(l, "#")
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		for c := range syscallGroup(t, l, seen) {
			out[c] = true
		}
	}
	return out
}

// checkOwnerGroup wants path owned by owner and group, with mode.
func checkOwnerGroup(t *testing.T, path, owner, group string, mode fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	u, err := user.Lookup(owner)
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(int(st.Uid)) != u.Uid || strconv.Itoa(int(st.Gid)) != g.Gid || fi.Mode().Perm() != mode {
		t.Errorf("%s: %d:%d %v, want %s:%s %v", path, st.Uid, st.Gid, fi.Mode().Perm(), owner, group, mode)
	}
}

func checkOwner(t *testing.T, path, owner string, mode fs.FileMode) {
	t.Helper()
	u, err := user.Lookup(owner)
	if err != nil {
		t.Fatal(err)
	}
	checkOwnerID(t, path, int(atou(t, u.Uid)), mode)
}

// checkOwnerID wants path owned by uid (user and group: the image's and the package's user
// each have a group of the same id or name) and, unless mode is 0, that mode.
func checkOwnerID(t *testing.T, path string, uid int, mode fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid {
		t.Errorf("%s: owner %d, want %d", path, st.Uid, uid)
	}
	if uid != 0 {
		if g, err := user.LookupGroupId(strconv.Itoa(int(st.Gid))); int(st.Gid) != uid && (err != nil || g.Name != ServiceUser) {
			t.Errorf("%s: group %d, want %s's", path, st.Gid, ServiceUser)
		}
	}
	if mode != 0 && fi.Mode()&(fs.ModeType|fs.ModePerm|fs.ModeSticky) != mode {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode(), mode)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

func sh(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gitShow is a file of the release's commit, nil when the commit has none.
func gitShow(t *testing.T, commit, path string) []byte {
	t.Helper()
	out, err := exec.Command("git", "-C", repoDir(t), "show", commit+":"+path).Output()
	if err != nil {
		return nil
	}
	return out
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v:\n%s", err, s)
	}
}

func atou(t *testing.T, s string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// unmountUnder unmounts whatever containers-storage mounted under dir (nothing with vfs, but
// t.TempDir's removal would fail on a mount).
func unmountUnder(dir string) {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	for line := range strings.Lines(string(mounts)) {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}
