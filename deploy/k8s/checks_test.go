package k8s

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// expect is what one render is checked against.
type expect struct {
	contract *contract
	programs map[string]*program // by image repository
	// external are the names this render may refer to without defining
	// them: the README's table for the base, nothing for an overlay that
	// is meant to be applied.
	external map[string]map[string]bool
	// env is the ONCEMALL_ENV every service must get.
	env string
	// tagged requires every image to carry a tag other than latest.
	tagged bool
}

// check is one rule; it returns every breach it finds.
type check func(m *manifest, x *expect) []error

// checks are all the rules, named for the failure messages.
var checks = []struct {
	name string
	fn   check
}{
	{"references", checkReferences},
	{"addresses", checkAddresses},
	{"probes", checkProbes},
	{"shutdown", checkShutdown},
	{"replicas", checkReplicas},
	{"disruption budgets", checkPDBs},
	{"variables", checkVariables},
	{"resources", checkResources},
	{"images", checkImages},
	{"nats", checkNATS},
	{"secret", checkSecret},
}

// runChecks runs every check and returns what they found.
func runChecks(m *manifest, x *expect) []error {
	var errs []error
	for _, c := range checks {
		for _, err := range c.fn(m, x) {
			errs = append(errs, fmt.Errorf("%s: %s: %w", m.name, c.name, err))
		}
	}
	return errs
}

// workload is a Deployment or a StatefulSet: what runs pods.
type workload struct {
	kind, name string
	replicas   int32
	selector   *metav1.LabelSelector
	pod        *corev1.PodTemplateSpec
	claims     []corev1.PersistentVolumeClaim
}

func (w workload) String() string { return w.kind + " " + w.name }

func workloads(m *manifest) []workload {
	var ws []workload
	for _, d := range m.deployments {
		ws = append(ws, workload{"Deployment", d.Name, replicasOf(d.Spec.Replicas), d.Spec.Selector, &d.Spec.Template, nil})
	}
	for _, s := range m.statefulSets {
		ws = append(ws, workload{"StatefulSet", s.Name, replicasOf(s.Spec.Replicas), s.Spec.Selector, &s.Spec.Template, s.Spec.VolumeClaimTemplates})
	}
	return ws
}

// replicasOf applies the API's default of one.
func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func (m *manifest) configMap(name string) *corev1.ConfigMap {
	for _, c := range m.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (m *manifest) secret(name string) *corev1.Secret {
	for _, s := range m.secrets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (m *manifest) service(name string) *corev1.Service {
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// secretValue returns a Secret's value for key as the API server would
// store it (stringData merged into data).
func secretValue(s *corev1.Secret, key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}

// envVar is one variable of a container, with its value where the render
// holds it.
type envVar struct {
	value string
	known bool   // false: from a Secret the deployment supplies, or the downward API
	from  string // where it is set, for messages
}

// containerEnv resolves a container's environment as the kubelet would:
// envFrom first, then env, a later one winning.
func containerEnv(m *manifest, c *corev1.Container) map[string]envVar {
	vars := map[string]envVar{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			if cm := m.configMap(ef.ConfigMapRef.Name); cm != nil {
				for k, v := range cm.Data {
					vars[ef.Prefix+k] = envVar{v, true, "ConfigMap " + cm.Name}
				}
			}
		case ef.SecretRef != nil:
			if s := m.secret(ef.SecretRef.Name); s != nil {
				for k := range s.Data {
					v, _ := secretValue(s, k)
					vars[ef.Prefix+k] = envVar{v, true, "Secret " + s.Name}
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = envVar{e.Value, true, "env"}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := "", false
			if cm := m.configMap(ref.Name); cm != nil {
				v, ok = cm.Data[ref.Key]
			}
			vars[e.Name] = envVar{v, ok, "ConfigMap " + ref.Name}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := "", false
			if s := m.secret(ref.Name); s != nil {
				v, ok = secretValue(s, ref.Key)
			}
			vars[e.Name] = envVar{v, ok, "Secret " + ref.Name + " key " + ref.Key}
		default:
			vars[e.Name] = envVar{from: "the downward API"}
		}
	}
	return vars
}

// programContainers yields each container that runs one of the
// repository's programs, with its workload.
func programContainers(m *manifest, x *expect, yield func(w workload, c *corev1.Container, p *program)) {
	for _, w := range workloads(m) {
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			if p, ok := x.programs[imageRepo(c.Image)]; ok {
				yield(w, c, p)
			}
		}
	}
}

// imageRepo and imageTag split an image reference; a registry's port
// (host:5000/x) is not a tag.
func imageRepo(image string) string {
	repo, _ := splitImage(image)
	return repo
}

func splitImage(image string) (repo, tag string) {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, ""
}

// checkReferences: every ConfigMap, Secret, key, volume and Service a
// workload names exists in the render, or is one the render may leave to
// the deployment (then a Secret key must be one the README lists).
func checkReferences(m *manifest, x *expect) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	configMap := func(w workload, name, key string) {
		cm := m.configMap(name)
		switch {
		case cm == nil && !x.external["ConfigMap"][name]:
			fail("%s names the ConfigMap %s, which is neither rendered nor left to the deployment", w, name)
		case cm != nil && key != "":
			if _, ok := cm.Data[key]; !ok {
				fail("%s names the key %s of ConfigMap %s, which has no such key", w, key, name)
			}
		}
	}
	secret := func(w workload, name, key string) {
		s := m.secret(name)
		switch {
		case s == nil && !x.external["Secret"][name]:
			fail("%s names the Secret %s, which is neither rendered nor left to the deployment", w, name)
		case s == nil && key != "" && !x.contract.secretKeys[key]:
			fail("%s names the key %s of the Secret %s, which README.md's table of its keys lacks", w, key, name)
		case s != nil && key != "":
			if _, ok := secretValue(s, key); !ok {
				fail("%s names the key %s of Secret %s, which has no such key", w, key, name)
			}
		}
	}
	for _, w := range workloads(m) {
		spec := &w.pod.Spec
		volumes := map[string]bool{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = true
			switch {
			case v.ConfigMap != nil:
				configMap(w, v.ConfigMap.Name, "")
			case v.Secret != nil:
				secret(w, v.Secret.SecretName, "")
			}
		}
		for _, pvc := range w.claims {
			volumes[pvc.Name] = true
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil {
					configMap(w, ef.ConfigMapRef.Name, "")
				}
				if ef.SecretRef != nil {
					secret(w, ef.SecretRef.Name, "")
				}
			}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom == nil:
				case e.ValueFrom.ConfigMapKeyRef != nil:
					configMap(w, e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Key)
				case e.ValueFrom.SecretKeyRef != nil:
					secret(w, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
			for _, vm := range c.VolumeMounts {
				if !volumes[vm.Name] {
					fail("%s mounts the volume %s, which it does not declare", w, vm.Name)
				}
			}
		}
	}
	for _, s := range m.statefulSets {
		svc := m.service(s.Spec.ServiceName)
		if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			fail("StatefulSet %s names the governing Service %s, which is not a rendered headless Service", s.Name, s.Spec.ServiceName)
		}
	}
	// A Service must reach pods, on ports they have.
	for _, svc := range m.services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		var selected []workload
		for _, w := range workloads(m) {
			if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.pod.Labels)) {
				selected = append(selected, w)
			}
		}
		if len(selected) == 0 {
			fail("Service %s selects no workload's pods (selector %v)", svc.Name, svc.Spec.Selector)
		}
		for _, w := range selected {
			for _, p := range svc.Spec.Ports {
				target := p.TargetPort
				if target.Type == intstr.Int && target.IntVal == 0 {
					target = intstr.FromInt32(p.Port) // the API's default
				}
				if _, ok := containerPort(w, target); !ok {
					fail("Service %s sends port %d to %s, which %s does not expose", svc.Name, p.Port, target.String(), w)
				}
			}
		}
	}
	return errs
}

// containerPort resolves a probe's or a Service's target port in w's
// containers.
func containerPort(w workload, port intstr.IntOrString) (int32, bool) {
	for _, c := range w.pod.Spec.Containers {
		for _, p := range c.Ports {
			if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// checkAddresses: every address a program is given (a *_URL or *_ADDR
// variable with a host) names a rendered Service on one of its ports, or a
// host the render leaves to the deployment.
func checkAddresses(m *manifest, x *expect) []error {
	var errs []error
	programContainers(m, x, func(w workload, c *corev1.Container, p *program) {
		for name, v := range containerEnv(m, c) {
			if !v.known || !(strings.HasSuffix(name, "_URL") || strings.HasSuffix(name, "_ADDR")) {
				continue
			}
			host, port, err := hostPort(v.value)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s=%q: %w", w, name, v.value, err))
				continue
			}
			if host == "" {
				continue // a listen address
			}
			svc := m.service(host)
			if svc == nil {
				if !x.external["host"][host] {
					errs = append(errs, fmt.Errorf("%s: %s=%q names %s, which is neither a rendered Service nor a host left to the deployment", w, name, redact(v.value), host))
				}
				continue
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == port }) {
				errs = append(errs, fmt.Errorf("%s: %s=%q names port %d, which the Service %s does not have", w, name, redact(v.value), port, host))
			}
		}
	})
	return errs
}

// hostPort reads host:port or a URL; a URL without a port gets its
// scheme's.
func hostPort(value string) (string, int32, error) {
	hostport := value
	if strings.Contains(value, "://") {
		u, err := url.Parse(value)
		if err != nil {
			return "", 0, err
		}
		hostport = u.Host
		if u.Port() == "" {
			defaults := map[string]string{"http": "80", "https": "443", "nats": "4222"}
			p, ok := defaults[u.Scheme]
			if !ok {
				return "", 0, fmt.Errorf("no port, and no default port known for %s", u.Scheme)
			}
			hostport = net.JoinHostPort(u.Hostname(), p)
		}
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return "", 0, err
	}
	return host, int32(n), nil
}

// redact hides a URL's password in a message.
func redact(value string) string {
	if u, err := url.Parse(value); err == nil && u.User != nil {
		return u.Redacted()
	}
	return value
}

// listenPort is the port a program's container listens on: the value of
// the one variable it reads whose name ends in HTTP_ADDR, which must be set.
func listenPort(m *manifest, c *corev1.Container, p *program) (int32, error) {
	var names []string
	for v := range p.vars {
		if strings.HasSuffix(v, "HTTP_ADDR") {
			names = append(names, v)
		}
	}
	if len(names) != 1 {
		return 0, fmt.Errorf("%s reads %d variables ending in HTTP_ADDR (%v), want one: its listen address", p.image, len(names), names)
	}
	v, ok := containerEnv(m, c)[names[0]]
	if !ok || !v.known {
		return 0, fmt.Errorf("%s is not set: the probes' and the Service's port must be stated where they can be compared", names[0])
	}
	_, port, err := hostPort(v.value)
	return port, err
}

// checkProbes: readiness on the program's readiness path and liveness on
// /healthz, both on the port it listens on; a program that waits for its
// dependencies at start-up gets a startup probe that waits as long.
func checkProbes(m *manifest, x *expect) []error {
	var errs []error
	programContainers(m, x, func(w workload, c *corev1.Container, p *program) {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", w, fmt.Sprintf(format, args...)))
		}
		listen, err := listenPort(m, c, p)
		if err != nil {
			fail("%v", err)
			return
		}
		probe := func(kind string, pr *corev1.Probe, path string) {
			switch {
			case pr == nil || pr.HTTPGet == nil:
				fail("no HTTP %s probe", kind)
			case pr.HTTPGet.Path != path:
				fail("%s probe on %s, want %s", kind, pr.HTTPGet.Path, path)
			default:
				if port, ok := containerPort(w, pr.HTTPGet.Port); !ok || port != listen {
					fail("%s probe on port %s, which is not the port %d the program listens on", kind, pr.HTTPGet.Port.String(), listen)
				}
			}
		}
		probe("readiness", c.ReadinessProbe, p.readiness)
		probe("liveness", c.LivenessProbe, "/healthz")
		if !p.vars["STARTUP_TIMEOUT"] {
			return
		}
		probe("startup", c.StartupProbe, "/healthz")
		startup, err := durationVar(m, c, "STARTUP_TIMEOUT")
		if err != nil {
			fail("%v", err)
			return
		}
		if c.StartupProbe != nil {
			if budget := probeBudget(c.StartupProbe); budget < startup {
				fail("the startup probe gives up after %s, before STARTUP_TIMEOUT (%s): the kubelet would kill a pod still waiting for its dependencies", budget, startup)
			}
		}
	})
	return errs
}

// probeBudget is how long a probe keeps failing before it acts, with the
// API's defaults (every 10s, 3 failures).
func probeBudget(p *corev1.Probe) time.Duration {
	period, failures := p.PeriodSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	return time.Duration(p.InitialDelaySeconds+period*failures) * time.Second
}

// durationVar reads a duration variable that must be set on the container.
func durationVar(m *manifest, c *corev1.Container, name string) (time.Duration, error) {
	v, ok := containerEnv(m, c)[name]
	if !ok || !v.known {
		return 0, fmt.Errorf("%s is not set: the manifests' timings are checked against it", name)
	}
	d, err := time.ParseDuration(v.value)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v.value, err)
	}
	return d, nil
}

// checkShutdown: a preStop sleep, then a grace period longer than the
// sleep plus the program's own shutdown.
func checkShutdown(m *manifest, x *expect) []error {
	var errs []error
	programContainers(m, x, func(w workload, c *corev1.Container, p *program) {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 1 {
			errs = append(errs, fmt.Errorf("%s: no preStop sleep: without it the pod stops taking connections before every node has stopped sending them", w))
			return
		}
		sleep := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		shutdown, what := p.shutdown, "its shutdown"
		if p.vars["SHUTDOWN_TIMEOUT"] {
			d, err := durationVar(m, c, "SHUTDOWN_TIMEOUT")
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", w, err))
				return
			}
			shutdown, what = d, "SHUTDOWN_TIMEOUT"
		}
		grace := 30 * time.Second // the API's default
		if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		if grace <= sleep+shutdown {
			errs = append(errs, fmt.Errorf("%s: terminationGracePeriodSeconds %s is not above the preStop sleep (%s) plus %s (%s): the pod would be killed mid-shutdown", w, grace, sleep, what, shutdown))
		}
	})
	return errs
}

// checkReplicas: each program runs with its replicas, NATS with its
// servers, and the streams are declared with as many replicas as there are
// servers.
func checkReplicas(m *manifest, x *expect) []error {
	var errs []error
	programContainers(m, x, func(w workload, c *corev1.Container, p *program) {
		if w.replicas != p.replicas {
			errs = append(errs, fmt.Errorf("%s: %d replicas, want %d", w, w.replicas, p.replicas))
		}
		if !p.vars["EVENT_STREAM_REPLICAS"] {
			return
		}
		if v := containerEnv(m, c)["EVENT_STREAM_REPLICAS"]; v.value != strconv.Itoa(natsServers) {
			errs = append(errs, fmt.Errorf("%s: EVENT_STREAM_REPLICAS=%q, want %d, one copy of each stream on every NATS server", w, v.value, natsServers))
		}
	})
	n := 0
	for _, s := range m.statefulSets {
		if s.Name == "nats" {
			n++
			if r := replicasOf(s.Spec.Replicas); r != natsServers {
				errs = append(errs, fmt.Errorf("StatefulSet nats: %d replicas, want %d", r, natsServers))
			}
		}
	}
	if n != 1 {
		errs = append(errs, fmt.Errorf("%d StatefulSets named nats, want 1", n))
	}
	return errs
}

// checkPDBs: each workload of more than one replica has exactly one
// disruption budget, which lets one pod go at a time; each budget selects
// the pods of exactly one workload.
func checkPDBs(m *manifest, x *expect) []error {
	var errs []error
	ws := workloads(m)
	for _, pdb := range m.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: selector %v selects every pod or none: %v", pdb.Name, pdb.Spec.Selector, err))
			continue
		}
		var selected []workload
		for _, w := range ws {
			if sel.Matches(labels.Set(w.pod.Labels)) {
				selected = append(selected, w)
			}
		}
		if len(selected) != 1 {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s selects the pods of %d workloads %v, want exactly 1", pdb.Name, len(selected), selected))
		}
	}
	for _, w := range ws {
		if w.replicas < 2 {
			continue
		}
		var budgets []string
		for _, pdb := range m.pdbs {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(w.pod.Labels)) {
				continue
			}
			budgets = append(budgets, pdb.Name)
			oneAtATime := (pdb.Spec.MaxUnavailable != nil && *pdb.Spec.MaxUnavailable == intstr.FromInt32(1)) ||
				(pdb.Spec.MinAvailable != nil && *pdb.Spec.MinAvailable == intstr.FromInt32(w.replicas-1))
			if !oneAtATime {
				errs = append(errs, fmt.Errorf("PodDisruptionBudget %s lets %s lose maxUnavailable %v / minAvailable %v pods, want exactly one at a time", pdb.Name, w, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable))
			}
		}
		if len(budgets) != 1 {
			errs = append(errs, fmt.Errorf("%s (%d replicas) has %d PodDisruptionBudgets %v, want 1", w, w.replicas, len(budgets), budgets))
		}
	}
	return errs
}

// checkVariables: every variable a program reads is set or listed in the
// README as left at its default; every variable set is one it reads (a
// misspelt name is otherwise silently ignored); none is both set and
// listed; ONCEMALL_ENV is the render's.
func checkVariables(m *manifest, x *expect) []error {
	var errs []error
	programContainers(m, x, func(w workload, c *corev1.Container, p *program) {
		set := containerEnv(m, c)
		for _, name := range sortedKeys(p.vars) {
			_, isSet := set[name]
			_, isDefault := x.contract.defaults[name]
			switch {
			case !isSet && !isDefault:
				errs = append(errs, fmt.Errorf("%s: %s reads %s, which is neither set (ConfigMap, Secret) nor listed in README.md as left at its default", w, p.image, name))
			case isSet && isDefault:
				errs = append(errs, fmt.Errorf("%s: sets %s (%s), which README.md lists as left at its default", w, name, set[name].from))
			}
		}
		for _, name := range sortedKeys(set) {
			if !p.vars[name] && !runtimeVars[name] {
				errs = append(errs, fmt.Errorf("%s: sets %s (%s), which %s does not read", w, name, set[name].from, p.image))
			}
		}
		if p.vars["ONCEMALL_ENV"] && set["ONCEMALL_ENV"].value != x.env {
			errs = append(errs, fmt.Errorf("%s: ONCEMALL_ENV=%q, want %q here", w, set["ONCEMALL_ENV"].value, x.env))
		}
	})
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkResources: every container requests and limits CPU and memory; a
// program's memory limit is above the RSS it may reach, and GOMEMLIMIT,
// where set, is below the limit.
func checkResources(m *manifest, x *expect) []error {
	var errs []error
	for _, w := range workloads(m) {
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("%s container %s: %s", w, c.Name, fmt.Sprintf(format, args...)))
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[r]
				lim, hasLim := c.Resources.Limits[r]
				if !hasReq || !hasLim {
					fail("no %s request or limit", r)
					continue
				}
				if req.Cmp(lim) > 0 {
					fail("%s request %s above its limit %s", r, req.String(), lim.String())
				}
			}
			limit := c.Resources.Limits[corev1.ResourceMemory]
			if p, ok := x.programs[imageRepo(c.Image)]; ok && p.memoryBudget > 0 && limit.Value() <= p.memoryBudget {
				fail("memory limit %s (%d bytes) is not above the %d bytes the program may use", limit.String(), limit.Value(), p.memoryBudget)
			}
			for _, e := range c.Env {
				if e.Name != "GOMEMLIMIT" {
					continue
				}
				n, err := goMemLimit(e.Value)
				if err != nil {
					fail("GOMEMLIMIT=%q: %v", e.Value, err)
				} else if n >= limit.Value() {
					fail("GOMEMLIMIT=%s is not below the memory limit %s: the collector would never get ahead of the kernel", e.Value, limit.String())
				}
			}
		}
	}
	return errs
}

// goMemLimit parses GOMEMLIMIT's syntax: a number of bytes with an
// optional B, KiB, MiB, GiB or TiB.
func goMemLimit(s string) (int64, error) {
	for i, unit := range []string{"TiB", "GiB", "MiB", "KiB"} {
		if n, ok := strings.CutSuffix(s, unit); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v << (10 * (4 - i)), err
		}
	}
	return strconv.ParseInt(strings.TrimSuffix(s, "B"), 10, 64)
}

// checkImages: every image of ours is one the README says how to build;
// every other image is pinned to a tag; where the render is meant to be
// applied, every image has a tag other than latest.
func checkImages(m *manifest, x *expect) []error {
	var errs []error
	for _, w := range workloads(m) {
		for _, c := range w.pod.Spec.Containers {
			repo, tag := splitImage(c.Image)
			_, ours := x.contract.images[repo]
			switch {
			case strings.HasPrefix(repo, "oncemall/") && !ours:
				errs = append(errs, fmt.Errorf("%s runs %s, which README.md's image table does not say how to build", w, c.Image))
			case !ours && (tag == "" || tag == "latest"):
				errs = append(errs, fmt.Errorf("%s runs %s without a version", w, c.Image))
			case x.tagged && (tag == "" || tag == "latest"):
				errs = append(errs, fmt.Errorf("%s runs %s without a tag: set one in the overlay's images", w, c.Image))
			}
		}
	}
	return errs
}

// checkNATS: the StatefulSet nats and its configuration agree: the routes
// name every server through the governing Service on the cluster port, the
// ports are the container's, the store is on the persistent volume, every
// $VARIABLE is in the container's environment, and, where the Secret is
// rendered, each service's NATS_URL carries the password its user has.
func checkNATS(m *manifest, x *expect) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var sts *appsv1.StatefulSet
	for _, s := range m.statefulSets {
		if s.Name == "nats" {
			sts = s
		}
	}
	if sts == nil {
		return []error{fmt.Errorf("no StatefulSet nats")}
	}
	w := workloads(&manifest{statefulSets: []*appsv1.StatefulSet{sts}})[0]
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		return []error{fmt.Errorf("%s: want one container", w)}
	}
	c := &sts.Spec.Template.Spec.Containers[0]
	conf, err := natsConf(m, c, w)
	if err != nil {
		return []error{err}
	}
	if svc := m.service(sts.Spec.ServiceName); svc != nil && !svc.Spec.PublishNotReadyAddresses {
		fail("Service %s does not publish the addresses of pods not ready yet: the servers could never find each other to become ready", svc.Name)
	}
	ports := map[string]string{ // container port name → the setting in nats.conf
		"client":  `(?m)^port:\s*(\d+)`,
		"monitor": `(?m)^http_port:\s*(\d+)`,
		"cluster": `(?ms)^cluster\s*\{.*?^\s+port:\s*(\d+)`,
	}
	for _, name := range sortedKeys(ports) {
		got := regexp.MustCompile(ports[name]).FindStringSubmatch(conf)
		want, ok := containerPort(w, intstr.FromString(name))
		if got == nil || !ok || got[1] != strconv.Itoa(int(want)) {
			fail("%s: the container port %s (%d) and nats.conf (%v) disagree", w, name, want, got)
		}
	}
	clusterPort, _ := containerPort(w, intstr.FromString("cluster"))
	// The routes: one to each server, every one with the user and the
	// password of the cluster's authorization (a server without them is
	// refused). A nats.conf string cannot hold a variable, so they are in
	// --routes, where Kubernetes expands $(VAR).
	routeAuth := regexp.MustCompile(`(?s)cluster\s*\{.*authorization\s*\{\s*user:\s*(\w+)\s+password:\s*\$(\w+)\s*\}`).FindStringSubmatch(conf)
	if routeAuth == nil {
		fail("%s: nats.conf's cluster has no authorization { user, password: $VAR }: any server that reaches the cluster port could join", w)
		routeAuth = []string{"", "?", "?"}
	}
	var want, have []string
	for i := range w.replicas {
		want = append(want, fmt.Sprintf("nats://%s-%d.%s:%d", sts.Name, i, sts.Spec.ServiceName, clusterPort))
	}
	args := slices.Concat(c.Command, c.Args)
	if i := slices.Index(args, "--routes"); i >= 0 && i+1 < len(args) {
		for _, r := range strings.Split(args[i+1], ",") {
			u, err := url.Parse(strings.ReplaceAll(r, "$("+routeAuth[2]+")", "ROUTE-PASSWORD"))
			if err != nil || u.User == nil {
				fail("%s: route %q carries no credentials: the other servers refuse it", w, r)
				continue
			}
			if pw, _ := u.User.Password(); u.User.Username() != routeAuth[1] || pw != "ROUTE-PASSWORD" {
				fail("%s: route %q does not log in as %s with $(%s), nats.conf's cluster authorization", w, r, routeAuth[1], routeAuth[2])
			}
			u.User = nil
			have = append(have, u.String())
		}
	}
	if !slices.Equal(want, have) {
		fail("%s: the routes (--routes) are %v, want one to each of the %d servers %v", w, have, w.replicas, want)
	}
	// JetStream's fsync, and each service's permissions, as compose's NATS.
	if !regexp.MustCompile(`(?ms)^jetstream\s*\{[^}]*^\s*sync_interval:\s*always\s*$`).MatchString(conf) {
		fail("%s: nats.conf's jetstream lacks sync_interval: always: a crash could lose acknowledged messages", w)
	}
	if compose, err := composeNATSConf(); err != nil {
		fail("%v", err)
	} else {
		want, have := userPermissions(compose), userPermissions(conf)
		for _, user := range sortedKeys(have) {
			if want[user] == "" || have[user] != want[user] {
				fail("%s: nats.conf's user %s has permissions %q, want deploy/nats.conf's %q", w, user, have[user], want[user])
			}
		}
		if len(have) == 0 {
			fail("%s: nats.conf has no user with permissions", w)
		}
	}
	if store := regexp.MustCompile(`(?m)^\s*store_dir:\s*(\S+)`).FindStringSubmatch(conf); store == nil || !onClaim(c, w, store[1]) {
		fail("%s: nats.conf's store_dir %v is not on a volume of the volumeClaimTemplates: JetStream's data would not survive the pod", w, store)
	}
	env := containerEnv(m, c)
	// $NAME outside quotes ("$JS.API.INFO" is a subject).
	for _, v := range regexp.MustCompile(`(?:^|[\s:\[,])\$([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(conf, -1) {
		if _, ok := env[v[1]]; !ok {
			fail("%s: nats.conf reads $%s, which the container's environment lacks: the server would not start", w, v[1])
		}
	}
	// Where the passwords are in the render, the URLs must carry them.
	users := map[string]string{} // user → the password's value
	for _, u := range regexp.MustCompile(`\{\s*user:\s*(\w+)[,\s]+password:\s*\$(\w+)`).FindAllStringSubmatch(conf, -1) {
		if v := env[u[2]]; v.known {
			users[u[1]] = v.value
		}
	}
	programContainers(m, x, func(pw workload, pc *corev1.Container, p *program) {
		v := containerEnv(m, pc)["NATS_URL"]
		if !v.known {
			return
		}
		u, err := url.Parse(v.value)
		if err != nil || u.User == nil {
			fail("%s: NATS_URL %q carries no user: nats.conf requires one", pw, redact(v.value))
			return
		}
		password, _ := u.User.Password()
		if want, ok := users[u.User.Username()]; !ok || want != password {
			fail("%s: NATS_URL's user %s and password are not those nats.conf gives that user", pw, u.User.Username())
		}
	})
	return errs
}

// natsConf returns the configuration file the nats container is started
// with: the --config argument, in a volume mounted from a ConfigMap.
func natsConf(m *manifest, c *corev1.Container, w workload) (string, error) {
	args := slices.Concat(c.Command, c.Args)
	i := slices.Index(args, "--config")
	if i < 0 || i+1 == len(args) {
		return "", fmt.Errorf("%s: nats-server is not started with --config: %v", w, args)
	}
	path := args[i+1]
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				if cm := m.configMap(v.ConfigMap.Name); cm != nil {
					if conf, ok := cm.Data[rel]; ok {
						return conf, nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("%s: --config %s is not a file of a mounted, rendered ConfigMap", w, path)
}

// onClaim reports whether path is under a mount of one of w's volume claim
// templates.
func onClaim(c *corev1.Container, w workload, path string) bool {
	for _, vm := range c.VolumeMounts {
		if !slices.ContainsFunc(w.claims, func(pvc corev1.PersistentVolumeClaim) bool { return pvc.Name == vm.Name }) {
			continue
		}
		mount := strings.TrimSuffix(vm.MountPath, "/")
		if path == mount || strings.HasPrefix(path, mount+"/") {
			return true
		}
	}
	return false
}

// checkSecret: where the render holds the Secret (an overlay's generator),
// it has exactly the README's keys, and every credential in it is a
// development value named as such.
func checkSecret(m *manifest, x *expect) []error {
	var errs []error
	for _, s := range m.secrets {
		keys := map[string]bool{}
		for k := range s.Data {
			keys[k] = true
		}
		for k := range s.StringData {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			v, _ := secretValue(s, k)
			switch {
			case !x.contract.secretKeys[k]:
				errs = append(errs, fmt.Errorf("Secret %s has the key %s, which README.md's table lacks", s.Name, k))
			case strings.HasSuffix(k, "-user"):
				// A user name is not a secret.
			case v != "" && !strings.Contains(v, "dev"):
				errs = append(errs, fmt.Errorf("Secret %s key %s: the value has no \"dev\" in it, so nothing says it is a development value", s.Name, k))
			}
		}
		for _, k := range sortedKeys(x.contract.secretKeys) {
			if !keys[k] {
				errs = append(errs, fmt.Errorf("Secret %s lacks the key %s, which README.md's table lists", s.Name, k))
			}
		}
	}
	return errs
}

// composeNATSConf reads deploy/nats.conf, docker-compose.yml's NATS.
func composeNATSConf() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "nats.conf"))
	return string(b), err
}

// userPermissions maps each user of a nats.conf to its permissions block,
// white space collapsed.
func userPermissions(conf string) map[string]string {
	out := map[string]string{}
	re := regexp.MustCompile(`(?s)user:\s*(\w+)\s+password:\s*\$\w+\s+permissions:\s*\{(.*?)\n {6}\}`)
	for _, m := range re.FindAllStringSubmatch(conf, -1) {
		out[m[1]] = strings.Join(strings.Fields(m[2]), " ")
	}
	return out
}
