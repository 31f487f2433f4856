package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	appv1alpha1 "wasmop.dev/reference/podreplica/api/v1alpha1"
)

// PodReplicaReconciler reconciles a PodReplica object.
type PodReplicaReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=app.example.com,resources=podreplicas,verbs=get;list;watch
// +kubebuilder:rbac:groups=app.example.com,resources=podreplicas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile keeps spec.size live pods for the PodReplica and lists them in its status.
func (r *PodReplicaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var pr appv1alpha1.PodReplica
	if err := r.Get(ctx, req.NamespacedName, &pr); err != nil {
		// Deleted: the garbage collector removes its pods (controller ownerReference).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	// The pods this PodReplica controls, from the cache's owner index (as the kubebuilder
	// book's CronJob lists its Jobs).
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(pr.Namespace), client.MatchingFields{podOwnerKey: pr.Name}); err != nil {
		return ctrl.Result{}, err
	}
	keep, remove, create := scale(livePods(&pr, pods.Items), pr.Spec.Size)

	if len(remove) > 0 {
		names := make([]string, 0, len(remove))
		for i := range remove {
			pod := &remove[i]
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			names = append(names, pod.Name)
		}
		log.Info("deleted pods", "count", len(remove), "pods", names)
		r.Recorder.Eventf(&pr, nil, corev1.EventTypeNormal, "ScaledDown", "Delete",
			"deleting %d pod(s): %s", len(remove), strings.Join(names, ", "))
	}
	if create > 0 {
		for range create {
			pod := newPod(&pr)
			if err := controllerutil.SetControllerReference(&pr, pod, r.Scheme); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.Create(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			// Create filled in the generated name: the status lists the new pod at once.
			keep = append(keep, *pod)
		}
		log.Info("created pods", "count", create)
		r.Recorder.Eventf(&pr, nil, corev1.EventTypeNormal, "ScaledUp", "Create",
			"creating %d pod(s)", create)
	}

	orig := pr.DeepCopy()
	pr.Status = computeStatus(&pr, keep, metav1.Now())
	if !equality.Semantic.DeepEqual(orig.Status, pr.Status) {
		if err := r.Status().Patch(ctx, &pr, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// podOwnerKey indexes pods by the name of the PodReplica that controls them.
const podOwnerKey = ".metadata.controller"

// podOwner is the index function of podOwnerKey: the controlling PodReplica's name.
func podOwner(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.APIVersion != appv1alpha1.GroupVersion.String() || owner.Kind != "PodReplica" {
		return nil
	}
	return []string{owner.Name}
}

// SetupWithManager sets up the controller with the Manager: the pods indexed by their
// controlling PodReplica, PodReplicas (spec changes only, status writes do not come back as
// reconciles) and the pods they control, with `workers` reconciles at once (the framework's
// default is 1).
func (r *PodReplicaReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podOwnerKey, podOwner); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&appv1alpha1.PodReplica{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("podreplica").
		Complete(r)
}
