package controller

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1alpha1 "wasmop.dev/reference/podreplica/api/v1alpha1"
)

var t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

func podReplica(size int32, generation int64) *appv1alpha1.PodReplica {
	return &appv1alpha1.PodReplica{
		TypeMeta: metav1.TypeMeta{APIVersion: "app.example.com/v1alpha1", Kind: "PodReplica"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: types.UID("owner-uid"), Generation: generation,
		},
		Spec: appv1alpha1.PodReplicaSpec{Size: size},
	}
}

// pod returns a pod controlled by the owner with uid ownerUID, created age seconds after t0,
// in phase, Ready when ready.
func pod(name, ownerUID string, created int, phase corev1.PodPhase, ready bool) corev1.Pod {
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns",
			Labels:            map[string]string{NameLabel: "web"},
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second)),
		},
		Status: corev1.PodStatus{
			Phase:      phase,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: readyStatus}},
		},
	}
	if ownerUID != "" {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "app.example.com/v1alpha1", Kind: "PodReplica", Name: "web",
			UID: types.UID(ownerUID), Controller: ptr.To(true),
		}}
	}
	return p
}

func names(pods []corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestNewPod(t *testing.T) {
	pr := podReplica(3, 1)
	got := newPod(pr)
	if got.GenerateName != "web-pod-" || got.Name != "" || got.Namespace != "ns" {
		t.Errorf("name/namespace: %q %q %q", got.GenerateName, got.Name, got.Namespace)
	}
	if !reflect.DeepEqual(got.Labels, map[string]string{"app.example.com/podreplica": "web"}) {
		t.Errorf("labels: %v", got.Labels)
	}
	c := got.Spec.Containers
	if len(c) != 1 || c[0].Name != "busybox" || c[0].Image != "busybox" ||
		!reflect.DeepEqual(c[0].Command, []string{"sleep", "3600"}) {
		t.Errorf("containers: %+v", c)
	}

	pr.Spec.Image = "alpine:3"
	pr.Spec.Command = []string{"sh", "-c", "sleep 5"}
	c = newPod(pr).Spec.Containers
	if c[0].Image != "alpine:3" || !reflect.DeepEqual(c[0].Command, []string{"sh", "-c", "sleep 5"}) {
		t.Errorf("custom image/command: %+v", c)
	}
}

func TestLivePodsKeepsOnlyOwnLivePods(t *testing.T) {
	pr := podReplica(3, 1)
	terminating := pod("web-pod-t", "owner-uid", 0, corev1.PodRunning, true)
	terminating.DeletionTimestamp = &t0
	notController := pod("web-pod-n", "owner-uid", 0, corev1.PodRunning, true)
	notController.OwnerReferences[0].Controller = nil
	pods := []corev1.Pod{
		pod("web-pod-c", "owner-uid", 0, corev1.PodRunning, true),
		pod("web-pod-a", "owner-uid", 0, corev1.PodPending, false),
		pod("web-pod-other", "other-uid", 0, corev1.PodRunning, true),
		pod("web-pod-orphan", "", 0, corev1.PodRunning, true),
		pod("web-pod-s", "owner-uid", 0, corev1.PodSucceeded, false),
		pod("web-pod-f", "owner-uid", 0, corev1.PodFailed, false),
		pod("web-pod-b", "owner-uid", 0, corev1.PodRunning, false),
		terminating,
		notController,
	}
	got := names(livePods(pr, pods))
	want := []string{"web-pod-a", "web-pod-b", "web-pod-c"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("live = %v, want %v", got, want)
	}
}

func TestIsPodReady(t *testing.T) {
	for _, tc := range []struct {
		pod  corev1.Pod
		want bool
	}{
		{pod("a", "u", 0, corev1.PodRunning, true), true},
		{pod("a", "u", 0, corev1.PodRunning, false), false},
		{pod("a", "u", 0, corev1.PodPending, true), false},
		{corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, false},
	} {
		if got := isPodReady(&tc.pod); got != tc.want {
			t.Errorf("isPodReady(%+v) = %v, want %v", tc.pod.Status, got, tc.want)
		}
	}
}

func TestScaleUpCreatesTheMissingPods(t *testing.T) {
	live := []corev1.Pod{pod("a", "u", 0, corev1.PodRunning, true)}
	keep, remove, create := scale(live, 3)
	if len(remove) != 0 || create != 2 || !reflect.DeepEqual(names(keep), []string{"a"}) {
		t.Errorf("keep %v remove %v create %d", names(keep), names(remove), create)
	}
	keep, remove, create = scale(nil, 0)
	if len(keep) != 0 || len(remove) != 0 || create != 0 {
		t.Errorf("empty: keep %v remove %v create %d", names(keep), names(remove), create)
	}
}

func TestScaleDownDeletesNotReadyThenNewestFirst(t *testing.T) {
	live := []corev1.Pod{
		pod("a", "u", 1, corev1.PodRunning, true),
		pod("b", "u", 5, corev1.PodRunning, true),
		pod("c", "u", 3, corev1.PodRunning, true),
		pod("d", "u", 0, corev1.PodPending, false),
		pod("e", "u", 5, corev1.PodRunning, true),
	}
	keep, remove, create := scale(live, 2)
	// d is not ready; then b and e are the newest (same second: name breaks the tie, e first).
	if create != 0 || !reflect.DeepEqual(names(remove), []string{"d", "e", "b"}) {
		t.Errorf("remove %v create %d", names(remove), create)
	}
	if !reflect.DeepEqual(names(keep), []string{"a", "c"}) {
		t.Errorf("keep %v", names(keep))
	}
	keep, remove, _ = scale(live, 0)
	if len(keep) != 0 || len(remove) != 5 {
		t.Errorf("to zero: keep %v remove %v", names(keep), names(remove))
	}
	keep, remove, create = scale(live, 5)
	if len(keep) != 5 || len(remove) != 0 || create != 0 {
		t.Errorf("steady: keep %v remove %v create %d", names(keep), names(remove), create)
	}
}

func TestComputeStatus(t *testing.T) {
	pr := podReplica(3, 4)
	pods := []corev1.Pod{
		pod("web-pod-c", "u", 0, corev1.PodRunning, true),
		pod("web-pod-a", "u", 0, corev1.PodRunning, true),
		pod("web-pod-b", "u", 0, corev1.PodPending, false),
	}
	st := computeStatus(pr, pods, t0)
	if !reflect.DeepEqual(st.Pods, []string{"web-pod-a", "web-pod-b", "web-pod-c"}) ||
		st.Replicas != 3 || st.ReadyReplicas != 2 || st.ObservedGeneration != 4 {
		t.Fatalf("status %+v", st)
	}
	c := meta.FindStatusCondition(st.Conditions, ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonPodsNotReady ||
		c.ObservedGeneration != 4 || c.Message != "2/3 pods ready" || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("condition %+v", c)
	}

	// All ready: the condition turns True, with a new transition time.
	pr.Status = st
	pods[2] = pod("web-pod-b", "u", 0, corev1.PodRunning, true)
	t1 := metav1.NewTime(t0.Add(time.Minute))
	st = computeStatus(pr, pods, t1)
	c = meta.FindStatusCondition(st.Conditions, ConditionReady)
	if st.ReadyReplicas != 3 || c.Status != metav1.ConditionTrue || c.Reason != ReasonAllPodsReady ||
		c.Message != "3/3 pods ready" || !c.LastTransitionTime.Equal(&t1) {
		t.Fatalf("all ready: %+v %+v", st, c)
	}

	// Same pods again: the status is equal, so Reconcile writes nothing.
	pr.Status = st
	again := computeStatus(pr, pods, metav1.NewTime(t1.Add(time.Minute)))
	if !reflect.DeepEqual(again, st) {
		t.Fatalf("not stable:\n%+v\n%+v", again, st)
	}

	// A new generation with 5 desired: Scaling, False, transition time moves.
	pr.Status = st
	pr.Spec.Size = 5
	pr.Generation = 5
	t2 := metav1.NewTime(t1.Add(time.Hour))
	st = computeStatus(pr, pods, t2)
	c = meta.FindStatusCondition(st.Conditions, ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonScaling || c.ObservedGeneration != 5 ||
		c.Message != "3 live pods, 5 desired" || st.ObservedGeneration != 5 || !c.LastTransitionTime.Equal(&t2) {
		t.Fatalf("scaling: %+v %+v", st, c)
	}
	if len(st.Conditions) != 1 {
		t.Fatalf("conditions: %+v", st.Conditions)
	}

	// Size 0 with no pods is ready.
	st = computeStatus(podReplica(0, 1), nil, t0)
	c = meta.FindStatusCondition(st.Conditions, ConditionReady)
	if len(st.Pods) != 0 || st.Replicas != 0 || c.Status != metav1.ConditionTrue {
		t.Fatalf("size 0: %+v", st)
	}
}

func TestComputeStatusDoesNotChangeItsInput(t *testing.T) {
	pr := podReplica(1, 1)
	pr.Status.Pods = []string{"old"}
	pr.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonScaling}}
	before := pr.DeepCopy()
	computeStatus(pr, []corev1.Pod{pod("web-pod-a", "u", 0, corev1.PodRunning, true)}, t0)
	if !reflect.DeepEqual(before, pr) {
		t.Errorf("input changed: %+v", pr.Status)
	}
}
