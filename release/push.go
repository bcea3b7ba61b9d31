package release

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions says where Push sends the image.
type PushOptions struct {
	// Registry is a registry host, optionally with a namespace: ghcr.io/kafkatrail,
	// 127.0.0.1:5000. The image goes to REGISTRY/kafkatrail-agent:TAG.
	Registry string
	// Tag is the layout's ref.name to push; "": its only multi-arch index (the layout also
	// tags each platform's image, for umoci).
	Tag string
	// Insecure allows plain HTTP to a registry that is not on a loopback or private address
	// (those get HTTP without it, as go-containerregistry decides).
	Insecure bool
}

// Push sends the multi-arch image of an OCI layout (Build's dist/oci) to a registry with the
// default keychain (~/.docker/config.json, credential helpers), and returns the reference
// pushed and the index's digest, which is the layout's: nothing is rebuilt or recompressed.
func Push(ctx context.Context, layoutDir string, o PushOptions) (string, v1.Hash, error) {
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		return "", v1.Hash{}, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return "", v1.Hash{}, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return "", v1.Hash{}, err
	}
	var found []v1.Descriptor
	for _, d := range m.Manifests {
		if o.Tag == "" && d.MediaType.IsIndex() || o.Tag != "" && d.Annotations[refNameAnnotation] == o.Tag {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return "", v1.Hash{}, fmt.Errorf("%s: %d images tagged %q, want one", layoutDir, len(found), o.Tag)
	}
	desc := found[0]
	tag := desc.Annotations[refNameAnnotation]
	if tag == "" {
		return "", v1.Hash{}, fmt.Errorf("%s: the image has no org.opencontainers.image.ref.name", layoutDir)
	}
	if !desc.MediaType.IsIndex() {
		return "", v1.Hash{}, fmt.Errorf("%s: %s is a %s, want a multi-arch index", layoutDir, tag, desc.MediaType)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return "", v1.Hash{}, err
	}
	repo := path.Base(ImageRepository)
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.NewTag(strings.TrimSuffix(o.Registry, "/")+"/"+repo+":"+tag, nameOpts...)
	if err != nil {
		return "", v1.Hash{}, err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return "", v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	for _, t := range MovingTags(tag) {
		moved := ref.Context().Tag(t)
		if err := remote.Tag(moved, idx, opts...); err != nil {
			return "", v1.Hash{}, fmt.Errorf("tag %s: %w", moved, err)
		}
	}
	return ref.String(), desc.Digest, nil
}

// MovingTags are the tags a release's image also gets beside its version: MAJOR.MINOR and
// latest, which users follow to get patch releases. A pre-release (0.2.0-rc.1) gets none: it
// must not become what `latest` pulls.
func MovingTags(version string) []string {
	if !versionRE.MatchString(version) || strings.Contains(version, "-") {
		return nil
	}
	parts := strings.SplitN(version, ".", 3)
	return []string{parts[0] + "." + parts[1], "latest"}
}
