package release

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush pushes the image to go-containerregistry's in-memory registry on 127.0.0.1 and
// pulls it back: the same index digest as the layout's, both platforms, the image's config.
func TestPush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image (about 30 s with a warm build cache)")
	}
	ctx := context.Background()
	dist := os.Getenv("KAFKATRAIL_DIST")
	var meta Metadata
	if dist != "" {
		meta = readMetadata(t, dist)
	} else {
		dist = filepath.Join(t.TempDir(), "dist")
		m, err := Build(ctx, Options{Repo: repoDir(t), Out: dist, Formats: []string{FormatImage}, Log: testLog{t}})
		if err != nil {
			t.Fatal(err)
		}
		meta = *m
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("registry on %s, want 127.0.0.1", host)
	}

	layoutDir := filepath.Join(dist, OCILayoutDir)
	for range 2 { // a second push of the same image changes nothing and must not fail
		ref, digest, err := Push(ctx, layoutDir, PushOptions{Registry: host + "/kafkatrail"})
		if err != nil {
			t.Fatal(err)
		}
		if want := host + "/kafkatrail/kafkatrail-agent:" + meta.Version; ref != want {
			t.Errorf("pushed %s, want %s", ref, want)
		}
		if digest.String() != meta.Image.IndexDigest {
			t.Errorf("pushed index %s, the layout's is %s", digest, meta.Image.IndexDigest)
		}
	}

	tag, err := name.NewTag(host + "/kafkatrail/kafkatrail-agent:" + meta.Version)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != meta.Image.IndexDigest {
		t.Errorf("the registry serves index %s, want %s", d, meta.Image.IndexDigest)
	}
	// What users follow for patch releases: the same index.
	for _, moving := range MovingTags(meta.Version) {
		desc, err := remote.Head(tag.Context().Tag(moving), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("tag %s: %v", moving, err)
		}
		if desc.Digest.String() != meta.Image.IndexDigest {
			t.Errorf("tag %s is %s, want the release's index %s", moving, desc.Digest, meta.Image.IndexDigest)
		}
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		// Pulled by platform, as a runtime does.
		img, err := remote.Image(tag, remote.WithContext(ctx), remote.WithPlatform(*m.Platform))
		if err != nil {
			t.Fatal(err)
		}
		checkPulled(t, img, m, meta)
	}
	slices.Sort(platforms)
	if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64/v8" {
		t.Errorf("platforms %s", got)
	}

	if _, _, err := Push(ctx, layoutDir, PushOptions{Registry: host, Tag: "no-such-tag"}); err == nil {
		t.Error("pushing a tag the layout lacks: no error")
	}
	if _, _, err := Push(ctx, layoutDir, PushOptions{Registry: host, Tag: PlatformTag(meta.Version, "amd64")}); err == nil {
		t.Error("pushing one platform's image as the release: no error")
	}
}

func TestMovingTags(t *testing.T) {
	for v, want := range map[string]string{
		"0.1.1":      "0.1 latest",
		"1.12.0":     "1.12 latest",
		"0.2.0-rc.1": "",
		"dev":        "",
	} {
		if got := strings.Join(MovingTags(v), " "); got != want {
			t.Errorf("MovingTags(%q) = %q, want %q", v, got, want)
		}
	}
}

func checkPulled(t *testing.T, img v1.Image, desc v1.Descriptor, meta Metadata) {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d != desc.Digest {
		t.Errorf("%s: pulled %s, the index lists %s", desc.Platform, d, desc.Digest)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != desc.Platform.Architecture || cf.Config.User != ImageUser ||
		cf.Config.Labels["org.opencontainers.image.revision"] != meta.Commit ||
		cf.Created.Unix() != meta.SourceDateEpoch {
		t.Errorf("%s: config %+v", desc.Platform, cf)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("%s: %d layers, want 1", desc.Platform, len(layers))
	}
}
