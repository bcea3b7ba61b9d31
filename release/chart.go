package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.yaml.in/yaml/v3"
)

// The Helm chart's place in the repository and in registries.
const (
	// ChartName is the chart's name (its Chart.yaml name:, and its directory's).
	ChartName = "kafkatrail-agent"
	// ChartDir is the chart's directory in the repository.
	ChartDir = "deploy/helm/" + ChartName
	// ChartRepository is where Push sends the chart under the registry:
	// helm install … oci://REGISTRY/charts/kafkatrail-agent --version VERSION.
	ChartRepository = "charts/" + ChartName

	// Helm's media types for a chart as an OCI artifact (helm.sh/helm/v4/pkg/registry).
	helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// ChartArchiveName is the packaged chart's file name, as `helm package` names it.
func ChartArchiveName(version string) string { return ChartName + "-" + version + ".tgz" }

var (
	chartVersionLine    = regexp.MustCompile(`(?m)^version:.*$`)
	chartAppVersionLine = regexp.MustCompile(`(?m)^appVersion:.*$`)
)

// writeChart packages the commit's chart into dir as `helm package --version V --app-version V`
// would, but reproducibly: Chart.yaml's version and appVersion are the release's (the image tag
// the chart deploys by default is appVersion), the files under one directory named after the
// chart, .helmignore applied, every timestamp the commit's.
func writeChart(src *source, dir string) (string, error) {
	root := filepath.Join(src.dir, ChartDir)
	ignore, err := readHelmignore(filepath.Join(root, ".helmignore"))
	if err != nil {
		return "", err
	}
	var entries []entry
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignore(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil // Helm's archives list files only
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", rel)
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "Chart.yaml" {
			if body, err = chartYAML(body, src.version); err != nil {
				return err
			}
		}
		entries = append(entries, entry{Name: path.Join(ChartName, rel), Mode: 0o644, Body: body})
		return nil
	})
	if err != nil {
		return "", err
	}
	name := ChartArchiveName(src.version)
	err = writeFileAtomic(filepath.Join(dir, name), func(w io.Writer) error { return gzipTar(w, entries, src.mtime) })
	return name, err
}

// chartYAML is Chart.yaml with version and appVersion set to version.
func chartYAML(body []byte, version string) ([]byte, error) {
	if !chartVersionLine.Match(body) || !chartAppVersionLine.Match(body) {
		return nil, fmt.Errorf("%s/Chart.yaml: want top-level version: and appVersion: lines", ChartDir)
	}
	body = chartVersionLine.ReplaceAll(body, []byte("version: "+version))
	return chartAppVersionLine.ReplaceAll(body, []byte(`appVersion: "`+version+`"`)), nil
}

// readHelmignore reads the patterns of a .helmignore Helm's way for the forms the chart uses:
// a file or directory name glob (path.Match), a trailing '/' for directories only, '#'
// comments. Negation and '**' are refused rather than read wrong.
func readHelmignore(p string) (func(rel string, dir bool) bool, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	type rule struct {
		glob    string
		dirOnly bool
	}
	var rules []rule
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") || strings.Contains(l, "**") {
			return nil, fmt.Errorf("%s: %q: negation and ** are not supported by the release's packager", p, l)
		}
		r := rule{glob: strings.TrimSuffix(l, "/"), dirOnly: strings.HasSuffix(l, "/")}
		if _, err := path.Match(r.glob, ""); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", p, l, err)
		}
		rules = append(rules, r)
	}
	return func(rel string, dir bool) bool {
		for _, r := range rules {
			if r.dirOnly && !dir {
				continue
			}
			target := path.Base(rel)
			if strings.Contains(r.glob, "/") {
				target = rel
			}
			if ok, _ := path.Match(r.glob, target); ok {
				return true
			}
		}
		return false
	}, sc.Err()
}

// helmChartArtifact is a packaged chart as Helm pushes it: an OCI manifest whose config is the
// chart's metadata as JSON and whose one layer is the .tgz.
type helmChartArtifact struct {
	config, manifest []byte
	layer            v1.Layer
}

var _ partial.CompressedImageCore = (*helmChartArtifact)(nil)

func (a *helmChartArtifact) RawConfigFile() ([]byte, error) { return a.config, nil }
func (a *helmChartArtifact) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}
func (a *helmChartArtifact) RawManifest() ([]byte, error) { return a.manifest, nil }
func (a *helmChartArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, _ := a.layer.Digest(); d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("no layer %s in the chart", h)
}

// chartLayer is the .tgz as a layer pushed as it is (no recompression: the digest is the file's).
type chartLayer struct {
	data   []byte
	digest v1.Hash
}

func (l *chartLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *chartLayer) DiffID() (v1.Hash, error) { return l.digest, nil }
func (l *chartLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.data)), nil
}
func (l *chartLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.data)), nil
}
func (l *chartLayer) Size() (int64, error)                { return int64(len(l.data)), nil }
func (l *chartLayer) MediaType() (types.MediaType, error) { return helmChartMediaType, nil }

// chartArtifact makes the OCI artifact of a packaged chart: Helm's config and layer media types
// and its manifest annotations (pkg/registry generateChartOCIAnnotations), created at the
// release's date so that the same chart gives the same manifest digest.
func chartArtifact(tgz []byte, created string) (v1.Image, map[string]any, error) {
	meta, err := chartMetadata(tgz)
	if err != nil {
		return nil, nil, err
	}
	config, err := json.Marshal(meta)
	if err != nil {
		return nil, nil, err
	}
	layerDigest, _, err := v1.SHA256(bytes.NewReader(tgz))
	if err != nil {
		return nil, nil, err
	}
	configDigest, _, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, nil, err
	}
	str := func(k string) string { s, _ := meta[k].(string); return s }
	ann := map[string]string{"org.opencontainers.image.created": created}
	for k, v := range map[string]string{
		"org.opencontainers.image.description": str("description"),
		"org.opencontainers.image.title":       str("name"),
		"org.opencontainers.image.version":     str("version"),
		"org.opencontainers.image.url":         str("home"),
	} {
		if strings.TrimSpace(v) != "" {
			ann[k] = v
		}
	}
	if src, _ := meta["sources"].([]any); len(src) > 0 {
		if s, _ := src[0].(string); s != "" {
			ann["org.opencontainers.image.source"] = s
		}
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: helmConfigMediaType, Size: int64(len(config)), Digest: configDigest},
		Layers:        []v1.Descriptor{{MediaType: helmChartMediaType, Size: int64(len(tgz)), Digest: layerDigest}},
		Annotations:   ann,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	img, err := partial.CompressedToImage(&helmChartArtifact{
		config: config, manifest: raw, layer: &chartLayer{data: tgz, digest: layerDigest},
	})
	return img, meta, err
}

// chartMetadata reads Chart.yaml out of a packaged chart, as a map with Chart.yaml's own keys
// (Helm's chart.Metadata has the same names in JSON).
func chartMetadata(tgz []byte) (map[string]any, error) {
	var chartYAML []byte
	err := readTarGz(bytes.NewReader(tgz), func(name string, body []byte) {
		if name == ChartName+"/Chart.yaml" {
			chartYAML = body
		}
	})
	if err != nil {
		return nil, err
	}
	if chartYAML == nil {
		return nil, fmt.Errorf("no %s/Chart.yaml in the chart", ChartName)
	}
	var meta map[string]any
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if meta["name"] != ChartName {
		return nil, fmt.Errorf("Chart.yaml: name %v, want %s", meta["name"], ChartName)
	}
	if _, ok := meta["version"].(string); !ok {
		return nil, fmt.Errorf("Chart.yaml: no version")
	}
	return meta, nil
}

// PushChart sends a packaged chart to REGISTRY/charts/kafkatrail-agent:VERSION as Helm's
// `helm push` does, and returns the reference and the manifest's digest.
func PushChart(ctx context.Context, tgzPath string, o PushOptions, created string) (string, v1.Hash, error) {
	tgz, err := os.ReadFile(tgzPath)
	if err != nil {
		return "", v1.Hash{}, err
	}
	img, meta, err := chartArtifact(tgz, created)
	if err != nil {
		return "", v1.Hash{}, fmt.Errorf("%s: %w", tgzPath, err)
	}
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	// OCI tags cannot hold '+': Helm writes a version's build metadata with '_'.
	tag := strings.ReplaceAll(meta["version"].(string), "+", "_")
	ref, err := name.NewTag(strings.TrimSuffix(o.Registry, "/")+"/"+ChartRepository+":"+tag, nameOpts...)
	if err != nil {
		return "", v1.Hash{}, err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	return ref.String(), d, err
}

// readTarGz calls file with each regular file of a gzipped tar.
func readTarGz(r io.Reader, file func(name string, body []byte)) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(io.LimitReader(tr, 16<<20))
		if err != nil {
			return err
		}
		file(h.Name, body)
	}
}
