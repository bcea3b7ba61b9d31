package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repoDir is the repository the tests build from: the parent of this module.
func repoDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWriteTarIsDeterministic(t *testing.T) {
	mtime := time.Unix(1700000000, 0)
	a := []entry{
		{Name: "b/file", Mode: 0o644, Body: []byte("hello")},
		dirEntry("b", 0o755),
		{Name: "a", Mode: 0o755, Body: []byte("x"), UID: 65532, GID: 65532},
	}
	b := []entry{a[2], a[0], a[1]}
	var x, y bytes.Buffer
	if err := gzipTar(&x, a, mtime); err != nil {
		t.Fatal(err)
	}
	if err := gzipTar(&y, b, mtime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x.Bytes(), y.Bytes()) {
		t.Fatal("the same entries in another order gave other bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(x.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header has name %q, mtime %v: want neither", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(mtime) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: mtime %v atime %v ctime %v", h.Name, h.ModTime, h.AccessTime, h.ChangeTime)
		}
		if h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 {
			t.Errorf("%s: uname %q gname %q pax %v: want numeric owners only", h.Name, h.Uname, h.Gname, h.PAXRecords)
		}
	}
	if got := strings.Join(names, " "); got != "a b/ b/file" {
		t.Errorf("entries %q, want sorted", got)
	}
	if err := writeTar(io.Discard, []entry{a[0], a[0]}, mtime); err == nil {
		t.Error("a name twice: no error")
	}
}

func TestPackagedUnit(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoDir(t), "configs/kafkatrail-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := packagedUnit(src, FormatDeb)
	if err != nil {
		t.Fatal(err)
	}
	u := string(unit)
	rpmUnit, err := packagedUnit(src, FormatRPM)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rpmUnit), "\nEnvironmentFile=-/etc/sysconfig/kafkatrail-agent\n") {
		t.Errorf("the rpm's unit does not read /etc/sysconfig/kafkatrail-agent:\n%s", rpmUnit)
	}
	for _, want := range []string{
		"\nExecStart=/usr/bin/kafkatrail-agent --config /etc/kafkatrail/agent.yaml\n",
		"\nUser=kafkatrail\nGroup=kafkatrail\n",
		"\nSupplementaryGroups=adm\n",
		"\nStateDirectory=kafkatrail\n",
		// The hand-made unit's hardening, kept.
		"\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nProtectHome=yes\n", "\nPrivateTmp=yes\n",
		"\nReadOnlyPaths=/var/log\n", "\nCapabilityBoundingSet=\n", "\nSystemCallFilter=@system-service\n",
		"\nEnvironmentFile=-/etc/default/kafkatrail-agent\n",
		"\n[Install]\nWantedBy=multi-user.target\n",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("the packaged unit lacks %q:\n%s", want, u)
		}
	}
	for _, unwanted := range []string{"DynamicUser", "/usr/local/bin", "install -m"} {
		if strings.Contains(u, unwanted) {
			t.Errorf("the packaged unit still has %q:\n%s", unwanted, u)
		}
	}
	for name, bad := range map[string]string{
		"no ExecStart":       strings.Replace(string(src), "ExecStart=", "#ExecStart=", 1),
		"another binary":     strings.Replace(string(src), "ExecStart=/usr/local/bin/kafkatrail-agent", "ExecStart=/usr/bin/agent", 1),
		"no DynamicUser":     strings.Replace(string(src), "DynamicUser=yes\n", "", 1),
		"a User already":     strings.Replace(string(src), "DynamicUser=yes\n", "DynamicUser=yes\nUser=nobody\n", 1),
		"no StateDirectory":  strings.Replace(string(src), "StateDirectory=kafkatrail\n", "", 1),
		"no SupplementaryGr": strings.Replace(string(src), "SupplementaryGroups=adm\n", "", 1),
		"no EnvironmentFile": strings.Replace(string(src), "EnvironmentFile=", "#EnvironmentFile=", 1),
	} {
		if _, err := packagedUnit([]byte(bad), FormatDeb); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// maxUnitExposure is the highest `systemd-analyze security` exposure the units may have: the
// sandbox of a daemon that must read /var/log and reach brokers over the network (PrivateNetwork,
// an IP allow list and PrivateUsers, which would take the adm group's files away, are what is
// left).
const maxUnitExposure = 2.5

// TestUnitExposure rates the hand-made unit and both packages' units with systemd-analyze
// security, offline, as an administrator checking what they install would.
func TestUnitExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze not found: run scripts/deps.sh (Debian's systemd package)")
	}
	src, err := os.ReadFile(filepath.Join(repoDir(t), "configs/kafkatrail-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	units := map[string][]byte{"configs/kafkatrail-agent.service": src}
	for _, f := range []string{FormatDeb, FormatRPM} {
		u, err := packagedUnit(src, f)
		if err != nil {
			t.Fatal(err)
		}
		units["the "+f+"'s unit"] = u
	}
	overall := regexp.MustCompile(`Overall exposure level for kafkatrail-agent\.service: ([0-9.]+) `)
	for name, body := range units {
		// The file's name is the unit's: systemd-analyze names it in its verdict.
		p := filepath.Join(t.TempDir(), "kafkatrail-agent.service")
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", p).CombinedOutput()
		m := overall.FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: systemd-analyze security: %v\n%s", name, err, out)
		}
		exposure, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("%s: exposure %.1f", name, exposure)
		if exposure > maxUnitExposure {
			t.Errorf("%s: exposure %.1f, want %.1f or lower:\n%s", name, exposure, maxUnitExposure, out)
		}
	}
}

const sampleHelp = `usage: agent --brokers HOST:PORT --topic T [--tail PATH_OR_GLOB ...] [flags]
       some-program | agent --brokers HOST:PORT --topic T
       agent check --config FILE | agent version

      --brokers stringArray             Kafka bootstrap servers, HOST:PORT[,HOST:PORT] (sets bootstrap.servers)
      --exactly-once[=true|false]       send the lines exactly once
  -X, --producer-property stringArray   producer property by its Java name: -X key=value (repeatable)
      --state-dir string                directory of the checkpoint file (default "/var/lib/kafkatrail")

Every flag can also be set in the config file (same name) or as KAFKATRAIL_<NAME>;
flags override the environment, which overrides the file.
`

func TestManPage(t *testing.T) {
	man, err := manPage([]byte(sampleHelp), "0.1.0", "2026-12-03")
	if err != nil {
		t.Fatal(err)
	}
	m := string(man)
	for _, want := range []string{
		`.TH KAFKATRAIL-AGENT 1 "2026-12-03" "kafkatrail 0.1.0" "User Commands"`,
		"\nkafkatrail\\-agent check \\-\\-config FILE | kafkatrail\\-agent version\n",
		"\nsome\\-program | kafkatrail\\-agent \\-\\-brokers",
		"\n\\fB\\-\\-brokers\\fR \\fIstringArray\\fR\nKafka bootstrap servers",
		"\n\\fB\\-\\-exactly\\-once\\fR[=true|false]\n",
		"\n\\fB\\-X\\fR, \\fB\\-\\-producer\\-property\\fR \\fIstringArray\\fR\n",
		".SH ENVIRONMENT\nEvery flag can also be set",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the man page lacks %q:\n%s", want, m)
		}
	}
	if _, err := manPage([]byte(strings.Replace(sampleHelp, "      --brokers", "      ??brokers", 1)), "0.1.0", "2026-12-03"); err == nil {
		t.Error("a flag line it cannot read: no error")
	}
	if _, err := manPage([]byte("usage: agent\n"), "0.1.0", "2026-12-03"); err == nil {
		t.Error("no flags: no error")
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
		cmd.Stdin = bytes.NewReader(man)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff -ww: %v\n%s", err, out)
		}
	}
}

func TestMaintainerScripts(t *testing.T) {
	for _, name := range []string{
		"deb-preinst.sh", "deb-postinst.sh", "deb-prerm.sh", "deb-postrm.sh",
		"rpm-pre.sh", "rpm-post.sh", "rpm-preun.sh", "rpm-postun.sh",
	} {
		body, err := script(name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(body, []byte("@")) {
			t.Errorf("%s: a placeholder is left:\n%s", name, body)
		}
		cmd := exec.Command("sh", "-n")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s\n%s", name, err, out, body)
		}
		if strings.Contains(string(body), "systemctl") && !strings.Contains(string(body), "[ -d /run/systemd/system ]") {
			t.Errorf("%s: runs systemctl without checking that systemd runs", name)
		}
	}
	pre, _ := script("deb-preinst.sh")
	if !regexp.MustCompile(`(?m)^\t\tuseradd --system --gid kafkatrail`).Match(pre) {
		t.Errorf("deb preinst: the user snippet is not indented into its case branch:\n%s", pre)
	}
	postrm, _ := script("deb-postrm.sh")
	purge := string(postrm[bytes.Index(postrm, []byte("purge)")):])
	for _, want := range []string{"rm -rf /var/lib/kafkatrail", "userdel kafkatrail", "groupdel kafkatrail"} {
		if !strings.Contains(purge, want) {
			t.Errorf("deb postrm purge lacks %q", want)
		}
	}
}

func TestPackageNames(t *testing.T) {
	for _, c := range []struct{ format, version, arch, want string }{
		{FormatDeb, "0.1.0", "amd64", "kafkatrail-agent_0.1.0-1_amd64.deb"},
		{FormatDeb, "0.1.0", "arm64", "kafkatrail-agent_0.1.0-1_arm64.deb"},
		{FormatRPM, "0.1.0", "amd64", "kafkatrail-agent-0.1.0-1.x86_64.rpm"},
		{FormatRPM, "0.1.0", "arm64", "kafkatrail-agent-0.1.0-1.aarch64.rpm"},
		{FormatDeb, "0.2.0-rc.1", "amd64", "kafkatrail-agent_0.2.0~rc.1-1_amd64.deb"},
	} {
		if got := packageName(c.format, c.version, c.arch); got != c.want {
			t.Errorf("%s %s %s: %s, want %s", c.format, c.version, c.arch, got, c.want)
		}
	}
}

func TestCABundle(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(debianCAs, "*.crt"))
	if len(names) == 0 {
		t.Skipf("no %s (apt-get install ca-certificates)", debianCAs)
	}
	b, source, err := caBundle("")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("-----BEGIN CERTIFICATE-----")); n != len(names) {
		t.Errorf("%d certificates in the bundle, %d in %s", n, len(names), debianCAs)
	}
	if !strings.Contains(source, debianCAs) {
		t.Errorf("source %q", source)
	}
	// This machine's own CAs stay out of the image.
	local, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	for _, l := range local {
		c, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, bytes.TrimSpace(c)) {
			t.Errorf("the image's bundle has %s", l)
		}
	}
	// What update-ca-certificates writes starts with the same bytes, unless an administrator
	// deselected some (/etc/ca-certificates.conf): its local additions follow.
	if sys, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		t.Logf("/etc/ssl/certs/ca-certificates.crt starts with the bundle: %v", bytes.HasPrefix(sys, b))
	}
	again, _, err := caBundle("")
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("a second bundle differs (%v)", err)
	}
}

// TestReproducible builds the release again and wants the same bytes: every artifact,
// SHA256SUMS, metadata.json and the image index's digest. Against the dist/ that
// scripts/release-test.sh had `make release` write (KAFKATRAIL_DIST), rebuilding its commit in
// this process; without it, it builds twice.
func TestReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole release (about a minute with a warm build cache)")
	}
	ctx := context.Background()
	first := os.Getenv("KAFKATRAIL_DIST")
	var meta Metadata
	if first != "" {
		meta = readMetadata(t, first)
	} else {
		first = filepath.Join(t.TempDir(), "dist")
		m, err := Build(ctx, Options{Repo: repoDir(t), Out: first, Log: testLog{t}})
		if err != nil {
			t.Fatal(err)
		}
		meta = *m
	}
	second := filepath.Join(t.TempDir(), "dist")
	again, err := Build(ctx, Options{
		Repo: repoDir(t), Rev: meta.Commit, Out: second, Version: meta.Version,
		SourceDateEpoch: meta.SourceDateEpoch, Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if again.Image == nil || meta.Image == nil || again.Image.IndexDigest != meta.Image.IndexDigest {
		t.Errorf("image index digest: first %+v, again %+v", meta.Image, again.Image)
	}
	kinds := map[string]bool{}
	for _, a := range meta.Artifacts {
		kinds[a.Kind] = true
	}
	for _, k := range []string{"archive", "deb", "rpm", "oci-archive"} {
		if !kinds[k] {
			t.Errorf("no %s among the artifacts: %+v", k, meta.Artifacts)
		}
	}
	names := []string{"SHA256SUMS", "metadata.json", "oci/index.json"}
	for _, a := range meta.Artifacts {
		names = append(names, a.Name)
	}
	for _, n := range names {
		a, err := os.ReadFile(filepath.Join(first, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(second, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes, then %d other bytes", n, len(a), len(b))
		}
	}
	t.Logf("%d artifacts identical, index %s", len(meta.Artifacts), meta.Image.IndexDigest)
}

func readMetadata(t testing.TB, dist string) Metadata {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		t.Fatalf("%v (run make release first)", err)
	}
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// testLog sends Build's progress to the test log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
