// Command kube is a multi-call binary holding a local Kubernetes control plane
// for wasmop's tests: kube-apiserver, kube-controller-manager, kube-scheduler,
// etcd, a version-matched kubectl and kwok (kwok.go).
//
// It dispatches on the basename of argv[0] (so symlinks named after a
// component work) or, failing that, on the first argument:
//
//	kube kube-apiserver --etcd-servers=...   # same as a symlink kube-apiserver
//	kube etcd --data-dir=...
//	kube kubectl get pods
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // for time zone support in CronJob

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // client auth plugins for kubectl
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// runCobra runs a component's cobra command with the given arguments (argv
// without the program/sub-command name) and exits with its status.
func runCobra(command *cobra.Command, args []string) {
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}

var commands = map[string]func(name string, args []string){
	"kube-apiserver": func(_ string, args []string) {
		runCobra(apiserver.NewAPIServerCommand(), args)
	},
	"kube-controller-manager": func(_ string, args []string) {
		runCobra(controllermanager.NewControllerManagerCommand(), args)
	},
	"kube-scheduler": func(_ string, args []string) {
		runCobra(scheduler.NewSchedulerCommand(), args)
	},
	"kwok": runKwok,
	"etcd": func(name string, args []string) {
		etcdmain.Main(append([]string{name}, args...))
	},
	"kubectl": func(name string, args []string) {
		// Mirrors k8s.io/kubernetes/cmd/kubectl: kubectl reads os.Args
		// itself in places (plugins, verbosity), so present it as kubectl.
		os.Args = append([]string{name}, args...)
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		command := kubectlcmd.NewDefaultKubectlCommand()
		command.SetArgs(args)
		if err := cli.RunNoErrOutput(command); err != nil {
			kubectlutil.CheckErr(err)
		}
		os.Exit(0)
	},
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: kube <%s> [args...]\n   or: invoke through a symlink named after the component\n",
		strings.Join(names, "|"))
}

func main() {
	base := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	if run, ok := commands[base]; ok {
		run(os.Args[0], os.Args[1:])
		return
	}
	if len(os.Args) > 1 {
		if run, ok := commands[os.Args[1]]; ok {
			run(os.Args[1], os.Args[2:])
			return
		}
		if os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
			usage()
			return
		}
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n", os.Args[1])
	}
	usage()
	os.Exit(2)
}
