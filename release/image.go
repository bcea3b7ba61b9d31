package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image layout facts the tests and the push read too.
const (
	// ImageUID is the image's unprivileged user and group (distroless's "nonroot" id).
	ImageUID = 65532
	// ImageUser is the config's User: numeric, so that Kubernetes' runAsNonRoot can check it
	// without reading /etc/passwd.
	ImageUser = "65532:65532"
	// ImageHTTP is where the image's agent serves /healthz, /readyz and /metrics
	// (KAFKATRAIL_HTTP): all interfaces, for the runtime's probes and Prometheus.
	ImageHTTP = "0.0.0.0:8686"
	// OCILayoutDir is the OCI image layout under the output directory.
	OCILayoutDir = "oci"
	// annotationContainerdName names the image for `ctr import` and `podman load` (which
	// prefer it to ref.name, a bare tag here so that oci:dist/oci:0.1.0 works).
	annotationContainerdName = "io.containerd.image.name"
	refNameAnnotation        = "org.opencontainers.image.ref.name"
)

// ImageArchiveName is kafkatrail-agent_<version>_oci.tar.
func ImageArchiveName(version string) string {
	return fmt.Sprintf("%s_%s_oci.tar", PackageName, version)
}

// writeImage builds the multi-arch image from the binaries, writes it as an OCI layout
// (dir/oci) and as an OCI archive, and returns its metadata and the archive's name.
func writeImage(src *source, bins []binary, caPath, dir string) (*ImageMetadata, string, error) {
	ca, caSource, err := caBundle(caPath)
	if err != nil {
		return nil, "", err
	}
	caSum := sha256.Sum256(ca)
	config, err := os.ReadFile(filepath.Join(src.dir, "configs/agent.yaml"))
	if err != nil {
		return nil, "", err
	}
	created := v1.Time{Time: src.mtime}
	labels := map[string]string{
		"org.opencontainers.image.title":       PackageName,
		"org.opencontainers.image.description": Summary,
		"org.opencontainers.image.version":     src.version,
		"org.opencontainers.image.revision":    src.commit,
		"org.opencontainers.image.source":      Homepage,
		"org.opencontainers.image.url":         Homepage,
		"org.opencontainers.image.licenses":    License,
		"org.opencontainers.image.vendor":      Vendor,
		"org.opencontainers.image.created":     src.date,
	}

	var (
		adds   []mutate.IndexAddendum
		images []v1.Image
	)
	for _, b := range bins {
		img, err := platformImage(src, b, ca, config, created, labels)
		if err != nil {
			return nil, "", fmt.Errorf("linux/%s: %w", b.arch, err)
		}
		d, err := describe(img, nil)
		if err != nil {
			return nil, "", err
		}
		images = append(images, img)
		adds = append(adds, mutate.IndexAddendum{Add: d})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	// The labels again on the index: what registries (ghcr.io's package page) read of a
	// multi-arch image.
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)

	// The layout's index.json names the multi-arch index by the version, and each platform's
	// image by VERSION-ARCH too: umoci (0.4) unpacks only a tag that leads to one image.
	tag := src.version
	fullName := ImageRepository + ":" + tag
	tagged := mutate.IndexAddendum{Add: idx, Descriptor: v1.Descriptor{
		Annotations: map[string]string{
			refNameAnnotation:        tag,
			annotationContainerdName: fullName,
		},
	}}
	top := []mutate.IndexAddendum{tagged}
	for i, img := range images {
		d, err := describe(img, map[string]string{refNameAnnotation: PlatformTag(src.version, bins[i].arch)})
		if err != nil {
			return nil, "", err
		}
		top = append(top, mutate.IndexAddendum{Add: d})
	}
	layoutDir := filepath.Join(dir, OCILayoutDir)
	if _, err := layout.Write(layoutDir, mutate.AppendManifests(empty.Index, top...)); err != nil {
		return nil, "", err
	}
	// The archive's index.json has the multi-arch image alone: `podman load` and
	// `skopeo copy oci-archive:FILE` take the only image without being told a tag.
	single, err := mutate.AppendManifests(empty.Index, tagged).RawManifest()
	if err != nil {
		return nil, "", err
	}

	digest, err := idx.Digest()
	if err != nil {
		return nil, "", err
	}
	im := &ImageMetadata{
		Name: fullName, Tag: tag, Layout: OCILayoutDir, Archive: ImageArchiveName(src.version),
		IndexDigest: digest.String(), CACertificatesSHA256: hex.EncodeToString(caSum[:]),
		CACertificatesSource: caSource,
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	for _, d := range manifest.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, "", err
		}
		size, err := pullSize(img)
		if err != nil {
			return nil, "", err
		}
		im.Platforms = append(im.Platforms, ImagePlatform{Platform: d.Platform.String(), Digest: d.Digest.String(), CompressedSize: size})
	}

	err = writeFileAtomic(filepath.Join(dir, im.Archive), func(w io.Writer) error {
		return tarDir(w, layoutDir, map[string][]byte{"index.json": single}, src.mtime)
	})
	return im, im.Archive, err
}

// debianCAs is where Debian's ca-certificates package keeps the certificates it ships.
const debianCAs = "/usr/share/ca-certificates/mozilla"

// caBundle is the image's CA bundle and where it came from: path as it is, or by default the
// certificates of Debian's ca-certificates package, concatenated in name order as
// update-ca-certificates does. Not the machine's /etc/ssl/certs/ca-certificates.crt: that
// one also has the certificates an administrator added to /usr/local/share/ca-certificates
// (a company's or a sandbox's proxy CA), which must not become trusted in a published image.
func caBundle(path string) ([]byte, string, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		return b, path, err
	}
	names, err := filepath.Glob(filepath.Join(debianCAs, "*.crt"))
	if err != nil || len(names) == 0 {
		return nil, "", fmt.Errorf("no certificates in %s (apt-get install ca-certificates): %v", debianCAs, err)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		c, err := os.ReadFile(n)
		if err != nil {
			return nil, "", err
		}
		b.Write(c)
		if len(c) > 0 && c[len(c)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	source := fmt.Sprintf("%s (%d certificates)", debianCAs, len(names))
	if v, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "ca-certificates").Output(); err == nil {
		source = fmt.Sprintf("ca-certificates %s, %s", v, source)
	}
	return b.Bytes(), source, nil
}

// platformImage is one architecture's image: a single layer on nothing (the binary is
// static), its config pointing at the binary and the packaged configuration.
func platformImage(src *source, b binary, ca, config []byte, created v1.Time, labels map[string]string) (v1.Image, error) {
	passwd := "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:kafkatrail agent:%s:/usr/sbin/nologin\n", ServiceUser, ImageUID, ImageUID, StateDir)
	group := "root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", ServiceUser, ImageUID)
	entries := []entry{
		dirEntry("etc", 0o755),
		{Name: "etc/passwd", Mode: 0o644, Body: []byte(passwd)},
		{Name: "etc/group", Mode: 0o644, Body: []byte(group)},
		// Go's resolver reads it for the order of /etc/hosts and DNS.
		{Name: "etc/nsswitch.conf", Mode: 0o644, Body: []byte("hosts: files dns\n")},
		dirEntry("etc/kafkatrail", 0o755),
		{Name: "etc/kafkatrail/agent.yaml", Mode: 0o644, Body: config},
		dirEntry("etc/ssl", 0o755),
		dirEntry("etc/ssl/certs", 0o755),
		// Where Go's crypto/x509 looks first on Linux: TLS to the brokers and to an OTLP
		// collector works with public CAs and no volume.
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Body: ca},
		// Some libraries and users expect a writable /tmp; the agent itself needs none.
		dirEntry("tmp", 0o1777),
		dirEntry("usr", 0o755),
		dirEntry("usr/bin", 0o755),
		{Name: "usr/bin/" + PackageName, Mode: 0o755, File: b.path},
		dirEntry("var", 0o755),
		dirEntry("var/lib", 0o755),
		// The state directory, the user's own: checkpoints survive in a volume mounted here.
		{Name: "var/lib/kafkatrail/", Mode: 0o750, UID: ImageUID, GID: ImageUID},
	}
	var layerBytes bytes.Buffer
	if err := gzipTar(&layerBytes, entries, src.mtime); err != nil {
		return nil, err
	}
	gz := layerBytes.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "kafkatrail release (release/cmd/release)",
			Comment:   PackageName + " " + src.version + ", CA certificates, passwd and the example configuration",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = b.arch
	if b.arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Config = v1.Config{
		User:       ImageUser,
		Entrypoint: []string{"/usr/bin/" + PackageName},
		Cmd:        []string{"--config", "/etc/kafkatrail/agent.yaml"},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			// Environment overrides the file (flags override both): a config mounted at
			// /etc/kafkatrail/agent.yaml with its own http: key needs KAFKATRAIL_HTTP
			// changed too, or --http.
			"KAFKATRAIL_HTTP=" + ImageHTTP,
			// state-dir's default, as systemd's StateDirectory= gives it, for a config
			// without state-dir.
			"STATE_DIRECTORY=" + StateDir,
		},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{"8686/tcp": {}},
		// Docker's HEALTHCHECK (Podman keeps it in docker-format images): the agent asks its own
		// page at KAFKATRAIL_HTTP, as there is no shell or curl to do it.
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", "/usr/bin/" + PackageName, "health"},
			Interval:    30 * time.Second,
			Timeout:     5 * time.Second,
			StartPeriod: 10 * time.Second,
			Retries:     3,
		},
		Labels: labels,
		// The agent flushes and saves its checkpoints on SIGTERM.
		StopSignal: "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// pullSize is what pulling img downloads: its manifest, config and compressed layers.
func pullSize(img v1.Image) (int64, error) {
	m, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return 0, err
	}
	size := int64(len(m) + len(c))
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		size += s
	}
	return size, nil
}

// tarDir writes the OCI layout directory as an OCI archive (the layout, tarred, as
// `skopeo copy oci-archive:` and `podman load` read it), deterministically; replace gives
// files their archived content instead of the layout's. It also makes the layout's files
// 0644 (go-containerregistry writes index.json and oci-layout executable).
func tarDir(w io.Writer, root string, replace map[string][]byte, mtime time.Time) error {
	var entries []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			entries = append(entries, dirEntry(rel, 0o755))
		case d.Type().IsRegular():
			if err := os.Chmod(p, 0o644); err != nil {
				return err
			}
			if body, ok := replace[rel]; ok {
				entries = append(entries, entry{Name: rel, Mode: 0o644, Body: body})
				break
			}
			entries = append(entries, entry{Name: rel, Mode: 0o644, File: p})
		default:
			return fmt.Errorf("%s: not a file or directory", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("%s: empty", root)
	}
	return writeTar(w, entries, mtime)
}

// described is an image with the descriptor an index lists it by: go-containerregistry
// would add an artifactType (the config's media type) to a plain image's descriptor, which
// the OCI spec reserves for artifacts and docker buildx does not write.
type described struct {
	v1.Image
	desc v1.Descriptor
}

// Descriptor implements partial.withDescriptor.
func (d described) Descriptor() (*v1.Descriptor, error) { return &d.desc, nil }

// describe wraps img with its descriptor: media type, digest, size, platform, annotations.
func describe(img v1.Image, annotations map[string]string) (described, error) {
	mt, err := img.MediaType()
	if err != nil {
		return described{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return described{}, err
	}
	size, err := img.Size()
	if err != nil {
		return described{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return described{}, err
	}
	return described{Image: img, desc: v1.Descriptor{
		MediaType: mt, Digest: digest, Size: size, Platform: cf.Platform(), Annotations: annotations,
	}}, nil
}

// PlatformTag is the layout's tag of one platform's image: 0.1.0-amd64.
func PlatformTag(version, arch string) string { return version + "-" + arch }
