package k8s

import (
	"fmt"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// manifest is one rendered kustomization, decoded. Checks read it and
// mutation tests change it.
type manifest struct {
	name         string
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	secrets      []*corev1.Secret
	pdbs         []*policyv1.PodDisruptionBudget
	namespaces   []*corev1.Namespace
}

// decoder decodes the kinds the manifests may use, and nothing else: an
// object of another kind is an error, so a new kind is added here on
// purpose, with its checks. Strict mode makes an unknown or duplicated
// field an error too: kustomize itself passes a misspelt field
// (readinesProbe) through untouched, and the API server of an older
// cluster may drop it without a word.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // the schemes of k8s.io/api register without error
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// render builds the kustomization in dir (relative to this package) from
// fs with the kustomize API, as `kubectl kustomize` does, and decodes every
// object it produces.
func render(fs filesys.FileSystem, dir string) (*manifest, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	m := &manifest{name: filepath.Base(dir)}
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", dir, r.CurId(), err)
		}
		obj, _, err := decoder.Decode(y, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", dir, r.CurId(), err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			m.deployments = append(m.deployments, o)
		case *appsv1.StatefulSet:
			m.statefulSets = append(m.statefulSets, o)
		case *corev1.Service:
			m.services = append(m.services, o)
		case *corev1.ConfigMap:
			m.configMaps = append(m.configMaps, o)
		case *corev1.Secret:
			m.secrets = append(m.secrets, o)
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, o)
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, o)
		default:
			return nil, fmt.Errorf("%s: %s: kind %T has no checks here", dir, r.CurId(), obj)
		}
	}
	return m, nil
}

// renderDir renders dir from the files on disk, failing t if it cannot.
func renderDir(t testing.TB, dir string) *manifest {
	t.Helper()
	m, err := render(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
