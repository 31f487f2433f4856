// Command podreplica-controller-runtime is the reference PodReplica operator written with
// controller-runtime, laid out as `kubebuilder init` + `kubebuilder create api` scaffold it.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	// Import all Kubernetes client auth plugins (e.g. Azure, GCP, OIDC, etc.)
	// to ensure that exec-entrypoint and run can make use of them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appv1alpha1 "wasmop.dev/reference/podreplica/api/v1alpha1"
	"wasmop.dev/reference/podreplica/internal/controller"
)

// userAgent names this operator in the API server's audit log (the benchmark counts its
// writes there). The scaffold keeps client-go's default user agent.
const userAgent = "podreplica-controller-runtime"

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))

	utilruntime.Must(appv1alpha1.AddToScheme(scheme))
	// +kubebuilder:scaffold:scheme
}

func main() {
	var metricsAddr string
	var enableLeaderElection bool
	var probeAddr string
	var workers int
	// The scaffold's defaults are ":8080"/"0" and ":8081" (all interfaces); the benchmark
	// runs this process on the host, so the defaults are loopback addresses.
	flag.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "The address the metrics endpoint binds to. "+
		"Served over plain HTTP; use 0 to disable the metrics service.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:8081", "The address the probe endpoint binds to.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false,
		"Enable leader election for controller manager. "+
			"Enabling this will ensure there is only one active controller manager.")
	flag.IntVar(&workers, "max-concurrent-reconciles", 1,
		"How many PodReplicas are reconciled at once (controller-runtime's MaxConcurrentReconciles; its default is 1).")
	opts := zap.Options{
		Development: true,
	}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	// --kubeconfig (registered by controller-runtime), else $KUBECONFIG, else in-cluster,
	// else ~/.kube/config.
	restConfig := ctrl.GetConfigOrDie()
	restConfig.UserAgent = userAgent

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress:   metricsAddr,
			SecureServing: false,
		},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         enableLeaderElection,
		LeaderElectionID:       "podreplica.app.example.com",
	})
	if err != nil {
		setupLog.Error(err, "unable to start manager")
		os.Exit(1)
	}

	if err := (&controller.PodReplicaReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("podreplica-controller"),
	}).SetupWithManager(mgr, workers); err != nil {
		setupLog.Error(err, "unable to create controller", "controller", "PodReplica")
		os.Exit(1)
	}
	// +kubebuilder:scaffold:builder

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	// Deviation from the scaffold (whose readiness check is healthz.Ping): /readyz answers OK
	// only once the informers of both watched kinds have synced, the meaning the wasmop
	// host's /readyz has, so the benchmark's "start to ready" measures the same thing for
	// both operators.
	if err := mgr.AddReadyzCheck("readyz", cacheSynced(mgr.GetCache(), &appv1alpha1.PodReplica{}, &corev1.Pod{})); err != nil {
		setupLog.Error(err, "unable to set up ready check")
		os.Exit(1)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// cacheSynced is a readiness check that passes once the informers of all the kinds have
// synced: the same informers the controller's watches use (GetInformer returns the one the
// cache holds, or registers it, and does not block here). It does not rely on
// Cache.WaitForCacheSync alone, which passes in the moment between the cache's start and the
// controller's start, when no informer is registered yet.
func cacheSynced(c cache.Cache, kinds ...client.Object) healthz.Checker {
	return func(req *http.Request) error {
		for _, kind := range kinds {
			informer, err := c.GetInformer(req.Context(), kind, cache.BlockUntilSynced(false))
			if err != nil {
				return err
			}
			if !informer.HasSynced() {
				return fmt.Errorf("informer for %T not synced", kind)
			}
		}
		return nil
	}
}
