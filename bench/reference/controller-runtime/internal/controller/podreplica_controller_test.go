package controller

import (
	"context"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appv1alpha1 "wasmop.dev/reference/podreplica/api/v1alpha1"
)

// The Reconcile loop against controller-runtime's fake client (no API server): it wires the
// pure functions of pods.go to reads and writes. Kubebuilder's scaffold tests Reconcile with
// envtest (a real kube-apiserver and etcd); the benchmark's cluster run plays that part here.

func newReconciler(t *testing.T, objs ...client.Object) (*PodReplicaReconciler, *events.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := appv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&appv1alpha1.PodReplica{}).
		WithIndex(&corev1.Pod{}, podOwnerKey, podOwner).
		WithObjects(objs...).Build()
	rec := events.NewFakeRecorder(100)
	return &PodReplicaReconciler{Client: c, Scheme: scheme, Recorder: rec}, rec
}

func reconcileOnce(t *testing.T, r *PodReplicaReconciler) {
	t.Helper()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("Reconcile = %+v, %v", res, err)
	}
}

func ownPods(t *testing.T, r *PodReplicaReconciler) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := r.List(context.Background(), &list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func getPodReplica(t *testing.T, r *PodReplicaReconciler) *appv1alpha1.PodReplica {
	t.Helper()
	var pr appv1alpha1.PodReplica
	if err := r.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &pr); err != nil {
		t.Fatal(err)
	}
	return &pr
}

// markReady does what the kubelet (kwok in the benchmark) does: Running and Ready.
func markReady(t *testing.T, r *PodReplicaReconciler, pods []corev1.Pod) {
	t.Helper()
	for i := range pods {
		p := &pods[i]
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if err := r.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

func readyCondition(pr *appv1alpha1.PodReplica) *metav1.Condition {
	return meta.FindStatusCondition(pr.Status.Conditions, ConditionReady)
}

func TestReconcileScalesUpDownAndReportsStatus(t *testing.T) {
	pr := podReplica(3, 1)
	r, rec := newReconciler(t, pr)

	reconcileOnce(t, r)
	pods := ownPods(t, r)
	if len(pods) != 3 {
		t.Fatalf("pods after scale-up: %d", len(pods))
	}
	got := getPodReplica(t, r)
	for _, p := range pods {
		if !metav1.IsControlledBy(&p, got) || p.GenerateName != "web-pod-" || p.Labels[NameLabel] != "web" {
			t.Errorf("pod %s: owner %+v labels %v", p.Name, p.OwnerReferences, p.Labels)
		}
	}
	if len(got.Status.Pods) != 3 || got.Status.Replicas != 3 || got.Status.ReadyReplicas != 0 {
		t.Errorf("status after create: %+v", got.Status)
	}
	if c := readyCondition(got); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonPodsNotReady {
		t.Errorf("condition after create: %+v", c)
	}
	if e := <-rec.Events; e != "Normal ScaledUp creating 3 pod(s)" {
		t.Errorf("event %q", e)
	}

	markReady(t, r, pods)
	reconcileOnce(t, r)
	got = getPodReplica(t, r)
	c := readyCondition(got)
	if got.Status.ReadyReplicas != 3 || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation ||
		got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status when ready: %+v", got.Status)
	}

	// Nothing changed: no write (the resourceVersion stays).
	rv := got.ResourceVersion
	reconcileOnce(t, r)
	if again := getPodReplica(t, r); again.ResourceVersion != rv {
		t.Errorf("steady reconcile wrote: %s -> %s", rv, again.ResourceVersion)
	}

	got.Spec.Size = 1
	got.Generation++ // the fake client does not bump generations
	if err := r.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r)
	pods = ownPods(t, r)
	if len(pods) != 1 {
		t.Fatalf("pods after scale-down: %d", len(pods))
	}
	got = getPodReplica(t, r)
	c = readyCondition(got)
	if len(got.Status.Pods) != 1 || got.Status.Pods[0] != pods[0].Name || c.Status != metav1.ConditionTrue ||
		c.ObservedGeneration != got.Generation {
		t.Errorf("status after scale-down: %+v", got.Status)
	}
	if e := <-rec.Events; len(e) < len("Normal ScaledDown") || e[:17] != "Normal ScaledDown" {
		t.Errorf("event %q", e)
	}
}

func TestReconcileMissingPodReplicaIsNotAnError(t *testing.T) {
	r, _ := newReconciler(t)
	reconcileOnce(t, r)
}
