// Command release writes kafkatrail's release artifacts into dist/ (make release), or pushes
// the image and the Helm chart they include to a registry (make release-push REGISTRY=...).
//
//	release [build] [--out DIR] [--version V] [--arch amd64,arm64] [--format tar,deb,rpm,image,chart]
//	release push --registry REGISTRY [--dir DIR] [--insecure]
//
// It builds from the repository's HEAD (a clean clone of the commit, so uncommitted changes
// are not released); SOURCE_DATE_EPOCH defaults to the commit's time.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kafkatrail/kafkatrail/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "release:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "build"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "build":
		return build(ctx, args, stdout, stderr)
	case "push":
		return push(ctx, args, stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q: build or push", cmd)
	}
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", "", "the repository (default: the git checkout around the working directory)")
	rev := fs.String("rev", "HEAD", "the commit to build")
	out := fs.String("out", "", "output directory, replaced as a whole (default: REPO/dist)")
	version := fs.String("version", "", "version instead of the commit's VERSION file")
	epoch := fs.Int64("source-date-epoch", 0, "every timestamp, in seconds (default: $SOURCE_DATE_EPOCH, else the commit's time)")
	arches := fs.String("arch", strings.Join(release.Arches, ","), "architectures")
	formats := fs.String("format", strings.Join(release.AllFormats, ","), "artifacts: tar, deb, rpm, image")
	ca := fs.String("ca-certificates", "", "CA bundle for the image (default: the certificates of Debian's ca-certificates package, without this machine's additions)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	r, err := repoRoot(ctx, *repo)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(r, "dist")
	}
	meta, err := release.Build(ctx, release.Options{
		Repo: r, Rev: *rev, Out: *out, Version: *version, SourceDateEpoch: *epoch,
		Arches: split(*arches), Formats: split(*formats), CACertificates: *ca, Log: stderr,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", meta.VersionLine)
	for _, a := range meta.Artifacts {
		fmt.Fprintf(stdout, "%10s  %s\n", mib(a.Size), filepath.Join(*out, a.Name))
	}
	if im := meta.Image; im != nil {
		fmt.Fprintf(stdout, "image %s, index %s, layout %s\n", im.Name, im.IndexDigest, filepath.Join(*out, im.Layout))
		for _, p := range im.Platforms {
			fmt.Fprintf(stdout, "%10s  %s %s (compressed)\n", mib(p.CompressedSize), p.Platform, p.Digest)
		}
	}
	return nil
}

func push(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	registry := fs.String("registry", "", "registry and namespace, e.g. ghcr.io/kafkatrail; the image goes to REGISTRY/kafkatrail-agent:VERSION")
	dir := fs.String("dir", "", "the release's output directory (default: REPO/dist)")
	tag := fs.String("tag", "", "the layout's tag to push (default: its only one)")
	insecure := fs.Bool("insecure", false, "plain HTTP to a registry on a public address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" {
		return errors.New("push: --registry is required (make release-push REGISTRY=ghcr.io/kafkatrail)")
	}
	if *dir == "" {
		r, err := repoRoot(ctx, "")
		if err != nil {
			return err
		}
		*dir = filepath.Join(r, "dist")
	}
	b, err := os.ReadFile(filepath.Join(*dir, "metadata.json"))
	if err != nil {
		return fmt.Errorf("%w (make release writes it)", err)
	}
	var meta release.Metadata
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(*dir, "metadata.json"), err)
	}
	opts := release.PushOptions{Registry: *registry, Tag: *tag, Insecure: *insecure}
	// What dist/ holds: a build of some formats (--format chart) has no image.
	if meta.Image != nil {
		ref, digest, err := release.Push(ctx, filepath.Join(*dir, release.OCILayoutDir), opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed %s@%s\n", ref, digest)
		if moving := release.MovingTags(meta.Version); len(moving) > 0 && *tag == "" {
			fmt.Fprintf(stdout, "tagged %s\n", strings.Join(moving, ", "))
		}
	}
	for _, a := range meta.Artifacts {
		if a.Kind != "helm-chart" {
			continue
		}
		ref, digest, err := release.PushChart(ctx, filepath.Join(*dir, a.Name), opts, meta.Date)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed %s@%s (helm install NAME oci://%s --version %s)\n", ref, digest,
			strings.TrimSuffix(*registry, "/")+"/"+release.ChartRepository, meta.Version)
	}
	return nil
}

// repoRoot is dir, else the top of the git checkout around the working directory.
func repoRoot(ctx context.Context, dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git checkout (give --repo): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
