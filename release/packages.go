package release

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// Paths inside the packages.
const (
	BinPath    = "/usr/bin/" + PackageName
	UnitPath   = "/usr/lib/systemd/system/" + PackageName + ".service"
	ConfigPath = "/etc/kafkatrail/agent.yaml"
	DocDir     = "/usr/share/doc/" + PackageName
	ManPath    = "/usr/share/man/man1/" + PackageName + ".1.gz"
	StateDir   = "/var/lib/kafkatrail"
	// ServiceUser is the system user (and group) the packaged service runs as.
	ServiceUser = "kafkatrail"
)

//go:embed packaging/*.sh
var packaging embed.FS

// packageName is the conventional file name nfpm gives the package (name_version-1_arch.deb,
// name-version-1.arch.rpm).
func packageName(format, version, arch string) string {
	info := &nfpm.Info{Name: PackageName, Arch: arch, Version: version, Release: "1"}
	info = nfpm.WithDefaults(info)
	if format == FormatDeb {
		return deb.Default.ConventionalFileName(info)
	}
	return rpm.DefaultRPM.ConventionalFileName(info)
}

// writePackage writes one .deb or .rpm into dir; stage is a scratch directory for the files
// nfpm reads by path (the adapted unit, the scripts, the man page).
func writePackage(format string, src *source, b binary, help []byte, stage, dir string) (string, error) {
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", err
	}
	unitSrc, err := os.ReadFile(filepath.Join(src.dir, "configs/kafkatrail-agent.service"))
	if err != nil {
		return "", err
	}
	unit, err := packagedUnit(unitSrc, format)
	if err != nil {
		return "", fmt.Errorf("configs/kafkatrail-agent.service: %w", err)
	}
	man, err := manPage(help, src.version, src.mtime.Format("2006-01-02"))
	if err != nil {
		return "", err
	}
	var manGz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&manGz, gzip.BestCompression)
	zw.Write(man)
	if err := zw.Close(); err != nil {
		return "", err
	}
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(stage, name)
		return p, os.WriteFile(p, data, 0o644)
	}
	unitFile, err := write("kafkatrail-agent.service", unit)
	if err != nil {
		return "", err
	}
	helpFile, err := write("agent-help.txt", help)
	if err != nil {
		return "", err
	}
	manFile, err := write("kafkatrail-agent.1.gz", manGz.Bytes())
	if err != nil {
		return "", err
	}
	docs, err := docFiles(src)
	if err != nil {
		return "", err
	}

	owned := func(mode os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: src.mtime}
	}
	contents := files.Contents{
		{Source: b.path, Destination: BinPath, FileInfo: owned(0o755)},
		{Source: unitFile, Destination: UnitPath, FileInfo: owned(0o644)},
		// noreplace: an upgrade keeps the administrator's agent.yaml (RPM; dpkg keeps a
		// changed conffile by itself and asks only when the package's copy changed too).
		// 0640 root:kafkatrail: it may hold a SASL password; the service's group reads it. The
		// group exists before the files arrive (preinst, %pre).
		{Source: filepath.Join(src.dir, "configs/agent.yaml"), Destination: ConfigPath, Type: files.TypeConfigNoReplace,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: ServiceUser, Mode: 0o640, MTime: src.mtime}},
		// Owned, so that rpm -e removes it once empty (dpkg does that for any directory).
		{Destination: "/etc/kafkatrail", Type: files.TypeDir, FileInfo: owned(0o755)},
	}
	// RPM marks documentation (rpm -qd, --excludedocs); those types make other packagers skip
	// the file, so the deb gets them as plain files.
	docType := func(name string) string {
		if format != FormatRPM {
			return files.TypeFile
		}
		if name == "LICENSE" {
			return files.TypeRPMLicense
		}
		return files.TypeRPMDoc
	}
	docs["agent-help.txt"] = helpFile
	for name, p := range docs {
		contents = append(contents, &files.Content{Source: p, Destination: DocDir + "/" + name, Type: docType(name), FileInfo: owned(0o644)})
	}
	// A man page is documentation too (rpmbuild marks %{_mandir} so by itself).
	contents = append(contents, &files.Content{Source: manFile, Destination: ManPath, Type: docType("man"), FileInfo: owned(0o644)})

	scripts := map[string]string{}
	prefix := map[string]string{FormatDeb: "deb-", FormatRPM: "rpm-"}[format]
	names := map[string][4]string{
		FormatDeb: {"preinst", "postinst", "prerm", "postrm"},
		FormatRPM: {"pre", "post", "preun", "postun"},
	}[format]
	for _, n := range names {
		body, err := script(prefix + n + ".sh")
		if err != nil {
			return "", err
		}
		p, err := write(prefix+n+".sh", body)
		if err != nil {
			return "", err
		}
		scripts[n] = p
	}

	info := &nfpm.Info{
		Name:        PackageName,
		Arch:        b.arch,
		Platform:    "linux",
		Version:     src.version,
		Release:     "1",
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  Maintainer,
		Description: Description,
		Vendor:      Vendor,
		Homepage:    Homepage,
		License:     License,
		MTime:       src.mtime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Umask:    0o022,
			Scripts: nfpm.Scripts{
				PreInstall: scripts[names[0]], PostInstall: scripts[names[1]],
				PreRemove: scripts[names[2]], PostRemove: scripts[names[3]],
			},
			// xz: about 10 % smaller than gzip for the agent (7.2 MiB against 8.0 for
			// amd64), and read by every dpkg and rpm still in use.
			Deb: nfpm.Deb{Compression: "xz"},
			RPM: nfpm.RPM{
				Compression: "xz",
				Group:       "System Environment/Daemons",
				Summary:     Summary,
				// Not os.Hostname(): the build machine's name would change the bytes.
				BuildHost: "localhost",
			},
		},
	}
	var pkgr nfpm.Packager = deb.Default
	if format == FormatRPM {
		// useradd and groupadd (%pre): a file dependency, which shadow-utils (Fedora, RHEL) and
		// shadow (SUSE) both provide; Debian's passwd is required priority.
		info.Depends = []string{"/usr/sbin/useradd", "/usr/sbin/groupadd"}
		pkgr = rpm.DefaultRPM
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return "", err
	}
	name := packageName(format, src.version, b.arch)
	err = writeFileAtomic(filepath.Join(dir, name), func(w io.Writer) error { return pkgr.Package(info, w) })
	return name, err
}

// script is an embedded maintainer script with @USER@ and @STATEDIR@ replaced by the shared
// snippets, indented as the placeholder is.
func script(name string) ([]byte, error) {
	body, err := packaging.ReadFile("packaging/" + name)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		snippet := map[string]string{"@USER@": "user.sh", "@STATEDIR@": "statedir.sh"}[strings.TrimSpace(line)]
		if snippet == "" {
			out.WriteString(line + "\n")
			continue
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		s, err := packaging.ReadFile("packaging/" + snippet)
		if err != nil {
			return nil, err
		}
		for l := range strings.Lines(string(s)) {
			if strings.TrimSpace(l) == "" {
				out.WriteString("\n")
				continue
			}
			out.WriteString(indent + l)
		}
	}
	return out.Bytes(), sc.Err()
}

// EnvironmentFile is where the packaged service reads KAFKATRAIL_* settings kept out of
// agent.yaml (a SASL password): the distribution's place for a daemon's environment.
func EnvironmentFile(format string) string {
	if format == FormatRPM {
		return "/etc/sysconfig/" + PackageName
	}
	return "/etc/default/" + PackageName
}

// packagedUnit adapts configs/kafkatrail-agent.service, written for a binary installed by hand,
// to the package of format: the binary in /usr/bin, the package's own kafkatrail user instead
// of a DynamicUser (a static user can own files across restarts and upgrades, and is what
// SupplementaryGroups=adm applies to), the distribution's environment file, the rest
// (the sandbox, StateDirectory) as it is. Its comment header, install instructions for the
// hand-made setup, gives way to the package's.
func packagedUnit(src []byte, format string) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString("# " + PackageName + " (installed by its package). Configure " + ConfigPath + ", then:\n" +
		"#   systemctl enable --now " + PackageName + "\n" +
		"# Secrets (KAFKATRAIL_PRODUCER_SASL_PASSWORD=...) go in " + EnvironmentFile(format) + ", mode 0600.\n" +
		"# Local changes go in a drop-in (systemctl edit " + PackageName + "): this file is replaced on upgrade.\n")
	seen := map[string]bool{}
	header := true
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if header && strings.HasPrefix(line, "#") {
			continue
		}
		header = false
		key, value, _ := strings.Cut(line, "=")
		switch key {
		case "ExecStart":
			fields := strings.Fields(value)
			if len(fields) == 0 || filepath.Base(fields[0]) != PackageName {
				return nil, fmt.Errorf("ExecStart=%s: want the %s binary", value, PackageName)
			}
			fields[0] = BinPath
			line = "ExecStart=" + strings.Join(fields, " ")
		case "DynamicUser":
			line = "User=" + ServiceUser + "\nGroup=" + ServiceUser
		case "EnvironmentFile":
			line = "EnvironmentFile=-" + EnvironmentFile(format)
		case "User", "Group":
			return nil, fmt.Errorf("%s: the package sets its own user", line)
		}
		seen[key] = true
		out.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, k := range []string{"ExecStart", "DynamicUser", "SupplementaryGroups", "StateDirectory", "EnvironmentFile", "[Install]"} {
		if !seen[k] {
			return nil, fmt.Errorf("no %s: the package's unit relies on it", k)
		}
	}
	return out.Bytes(), nil
}

var (
	flagLine  = regexp.MustCompile(`^\s+(?:(-[A-Za-z]), )?(--[A-Za-z0-9.-]+)(\[=[^\]]*\])?(?: ([A-Za-z]+))?\s{2,}(.*)$`)
	agentWord = regexp.MustCompile(`(^|\s)agent( |$)`)
)

// manPage turns the agent's --help into kafkatrail-agent(1): the usage lines as the synopsis,
// one entry per flag, the closing paragraph on the environment. The help is the single
// source: a flag added to the agent is in the next release's man page without more work.
func manPage(help []byte, version, date string) ([]byte, error) {
	// Paragraphs: the usage lines, the flags, then the notes on the environment.
	var paras [][]string
	para := []string(nil)
	for l := range strings.Lines(string(help) + "\n") {
		l = strings.TrimRight(l, "\n")
		if strings.TrimSpace(l) != "" {
			para = append(para, l)
			continue
		}
		if len(para) > 0 {
			paras = append(paras, para)
			para = nil
		}
	}
	if len(paras) < 2 {
		return nil, fmt.Errorf("--help: no usage or no flags to make a man page of")
	}
	usage, flags := paras[0], paras[1]
	var tail []string
	for _, p := range paras[2:] {
		tail = append(tail, p...)
	}
	for i, u := range usage {
		usage[i] = strings.TrimPrefix(strings.TrimSpace(u), "usage: ")
	}
	var m strings.Builder
	fmt.Fprintf(&m, ".TH %s 1 %q %q %q\n", strings.ToUpper(PackageName), date, "kafkatrail "+version, "User Commands")
	// .nh: no hyphenation, which would break command and path names across lines.
	m.WriteString(".nh\n")
	fmt.Fprintf(&m, ".SH NAME\n%s \\- %s\n", roff(PackageName), roff("log files into Kafka, traced"))
	m.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, u := range usage {
		m.WriteString(roff(agentWord.ReplaceAllString(u, "${1}"+PackageName+"${2}")) + "\n")
	}
	m.WriteString(".fi\n.SH DESCRIPTION\n")
	m.WriteString(roff(strings.ReplaceAll(strings.TrimPrefix(Description, Summary+"\n"), "\n", " ")) + "\n")
	m.WriteString(".PP\nThe packaged service runs as the user " + ServiceUser + " with " + roff(ConfigPath) +
		" (systemctl enable \\-\\-now " + roff(PackageName) + "); checkpoints are kept in " + roff(StateDir) + ".\n")
	m.WriteString(".SH OPTIONS\n")
	for _, f := range flags {
		g := flagLine.FindStringSubmatch(f)
		if g == nil {
			return nil, fmt.Errorf("--help: cannot read the flag line %q", f)
		}
		short, long, opt, typ, desc := g[1], g[2], g[3], g[4], g[5]
		m.WriteString(".TP\n")
		if short != "" {
			m.WriteString("\\fB" + roff(short) + "\\fR, ")
		}
		m.WriteString("\\fB" + roff(long) + "\\fR" + roff(opt))
		if typ != "" {
			m.WriteString(" \\fI" + typ + "\\fR")
		}
		m.WriteString("\n" + roff(desc) + "\n")
	}
	if len(tail) > 0 {
		m.WriteString(".SH ENVIRONMENT\n" + roff(strings.Join(tail, " ")) + "\n")
	}
	m.WriteString(".SH FILES\n.TP\n" + roff(ConfigPath) + "\nthe configuration (kept across upgrades)\n" +
		".TP\n" + roff(StateDir) + "\nthe state directory: checkpoints, dead letters\n" +
		".TP\n" + roff(UnitPath) + "\nthe systemd unit\n")
	m.WriteString(".SH SEE ALSO\n" + roff(DocDir+"/README.md") + "\n.br\n" + roff(Homepage) + "\n")
	return []byte(m.String()), nil
}

// roff escapes text for a man page line: backslashes, hyphens (else they may print as
// typographic dashes and fail to copy-paste) and a leading dot or quote (a request).
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
