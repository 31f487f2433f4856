package controller

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1alpha1 "wasmop.dev/reference/podreplica/api/v1alpha1"
)

// The decisions of the reconciler, as pure functions of what it read: which pods are ours
// and live, which to create or delete, and the status that describes them. Reconcile does
// the I/O around them; the unit tests call them without a cluster.

const (
	// NameLabel is put on every pod, with the PodReplica's name as value (the same label
	// the wasmop PodReplica plugin sets, so the pods of both operators look alike).
	NameLabel = "app.example.com/podreplica"
	// DefaultImage is the pods' image when spec.image is not set.
	DefaultImage = "busybox"
	// ContainerName is the name of the pods' only container.
	ContainerName = "busybox"

	// ConditionReady is the condition type that says all desired pods are live and ready.
	ConditionReady = "Ready"
	// ReasonAllPodsReady and the other reasons are the ones the wasmop plugin reports.
	ReasonAllPodsReady = "AllPodsReady"
	// ReasonScaling says the number of live pods is not spec.size.
	ReasonScaling = "Scaling"
	// ReasonPodsNotReady says all pods are there but some are not Ready.
	ReasonPodsNotReady = "PodsNotReady"
)

// DefaultCommand is the pods' command when spec.command is not set.
var DefaultCommand = []string{"sleep", "3600"}

// labelsFor returns the labels of the pods of pr; they are also the selector the pods are
// listed with.
func labelsFor(pr *appv1alpha1.PodReplica) map[string]string {
	return map[string]string{NameLabel: pr.Name}
}

// newPod returns a pod for pr, without its owner reference (Reconcile sets it with
// controllerutil.SetControllerReference): generated name `<name>-pod-…`, the label, the image
// and the command.
func newPod(pr *appv1alpha1.PodReplica) *corev1.Pod {
	image := pr.Spec.Image
	if image == "" {
		image = DefaultImage
	}
	command := pr.Spec.Command
	if command == nil {
		command = DefaultCommand
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: pr.Name + "-pod-",
			Namespace:    pr.Namespace,
			Labels:       labelsFor(pr),
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    ContainerName,
				Image:   image,
				Command: append([]string(nil), command...),
			}},
		},
	}
}

// livePods keeps the pods whose controller is pr and that count towards spec.size: not being
// deleted and not finished (Succeeded or Failed). A pod that merely carries the label is not
// ours. The result is sorted by name.
func livePods(pr *appv1alpha1.PodReplica, pods []corev1.Pod) []corev1.Pod {
	var live []corev1.Pod
	for i := range pods {
		pod := &pods[i]
		if !metav1.IsControlledBy(pod, pr) {
			continue
		}
		if pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		live = append(live, *pod)
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live
}

// isPodReady says whether the pod is Running and its Ready condition is True.
func isPodReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// scale compares the live pods with size: it returns the pods to keep, the pods to delete
// and how many pods to create. Pods are deleted not-ready first, then newest first (name
// breaks ties, so the choice is deterministic).
func scale(live []corev1.Pod, size int32) (keep, remove []corev1.Pod, create int) {
	want := max(int(size), 0)
	if len(live) <= want {
		return live, nil, want - len(live)
	}
	ordered := append([]corev1.Pod(nil), live...)
	sort.SliceStable(ordered, func(i, j int) bool {
		a, b := &ordered[i], &ordered[j]
		if ra, rb := isPodReady(a), isPodReady(b); ra != rb {
			return !ra
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
	surplus := len(live) - want
	remove = ordered[:surplus]
	keep = append([]corev1.Pod(nil), ordered[surplus:]...)
	sort.Slice(keep, func(i, j int) bool { return keep[i].Name < keep[j].Name })
	return keep, remove, 0
}

// computeStatus returns the status of pr that describes pods (its live pods after this
// reconcile's deletions and creations): their sorted names and count, how many are ready,
// the generation it was computed for and the Ready condition. The condition keeps its
// lastTransitionTime while its status does not change (meta.SetStatusCondition); now is the
// time of a transition.
func computeStatus(pr *appv1alpha1.PodReplica, pods []corev1.Pod, now metav1.Time) appv1alpha1.PodReplicaStatus {
	status := *pr.Status.DeepCopy()
	names := make([]string, 0, len(pods))
	var ready int32
	for i := range pods {
		names = append(names, pods[i].Name)
		if isPodReady(&pods[i]) {
			ready++
		}
	}
	sort.Strings(names)
	size := pr.Spec.Size
	replicas := int32(len(names))

	condition := metav1.Condition{
		Type:               ConditionReady,
		ObservedGeneration: pr.Generation,
		LastTransitionTime: now,
	}
	switch {
	case replicas == size && ready == size:
		condition.Status = metav1.ConditionTrue
		condition.Reason = ReasonAllPodsReady
		condition.Message = fmt.Sprintf("%d/%d pods ready", ready, size)
	case replicas != size:
		condition.Status = metav1.ConditionFalse
		condition.Reason = ReasonScaling
		condition.Message = fmt.Sprintf("%d live pods, %d desired", replicas, size)
	default:
		condition.Status = metav1.ConditionFalse
		condition.Reason = ReasonPodsNotReady
		condition.Message = fmt.Sprintf("%d/%d pods ready", ready, size)
	}

	status.Pods = names
	status.Replicas = replicas
	status.ReadyReplicas = ready
	status.ObservedGeneration = pr.Generation
	meta.SetStatusCondition(&status.Conditions, condition)
	return status
}
