"""The component's entry point (``componentize-py ... componentize app``)."""

from wasmop_sdk.component import export

from podreplica import PodReplica

WitWorld = export(PodReplica)
