package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CRD these types describe is deploy/crds/podreplica.yaml of the wasmop repository
// (generated there from the Rust plugin's types); the markers below say the same thing in
// kubebuilder's words, but no controller-gen run reads them here.

// PodReplicaSpec defines the desired state of PodReplica.
type PodReplicaSpec struct {
	// Size is the number of pods to keep running, from 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Size int32 `json:"size"`

	// Image is the container image of the pods (default `busybox`).
	// +kubebuilder:validation:MinLength=1
	// +optional
	Image string `json:"image,omitempty"`

	// Command is the command of the pods' container (default `sleep 3600`).
	// +optional
	Command []string `json:"command,omitempty"`
}

// PodReplicaStatus defines the observed state of PodReplica.
type PodReplicaStatus struct {
	// Pods are the names of the live pods, sorted.
	// +optional
	Pods []string `json:"pods,omitempty"`

	// Replicas is the number of live pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of live pods that are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: `Ready` is True when all desired pods are live and ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pr
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Live",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PodReplica is the Schema for the podreplicas API.
type PodReplica struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodReplicaSpec   `json:"spec"`
	Status PodReplicaStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PodReplicaList contains a list of PodReplica.
type PodReplicaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodReplica `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PodReplica{}, &PodReplicaList{})
}
