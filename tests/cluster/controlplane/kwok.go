package main

import (
	"os"

	"github.com/spf13/pflag"

	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

// runKwok runs kwok as sigs.k8s.io/kwok/cmd/kwok's main does: its global flags
// (logging, --config) are parsed first, then its cobra command with the rest.
// kwok lives in this binary rather than its own so that it compiles against
// the same k8s.io libraries as the control plane: a cold build compiles them
// once, not again at kwok's own versions.
//
// cobra adds pflag.CommandLine to every root command, and the Kubernetes
// packages linked in register flags there when they load (component-base's
// --version among them, which clashes with kwok's own): kwok gets an empty one,
// as in its own binary.
func runKwok(name string, args []string) {
	os.Args = append([]string{name}, args...)
	pflag.CommandLine = pflag.NewFlagSet(name, pflag.ExitOnError)
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flagset)
	ctx, err := kwokconfig.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		os.Exit(1)
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	command.SetArgs(args)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}
