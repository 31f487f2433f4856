package wasmop

import "fmt"

// ErrorKind says which case of the contract's reconcile-error an error is.
type ErrorKind int

const (
	// KindFailed: anything else; retried with backoff.
	KindFailed ErrorKind = iota
	// KindInvalidSpec: the primary object's spec is invalid; retrying will not help until it
	// changes.
	KindInvalidSpec
	// KindTransient: a temporary problem; the host retries with backoff.
	KindTransient
)

// ReconcileError is why a reconcile produced no plan. Any other error a plugin returns is
// reported like KindFailed. (A panic is not an error: it traps the instance, and the host
// counts a fault.)
type ReconcileError struct {
	Kind    ErrorKind
	Message string
}

func (e *ReconcileError) Error() string { return e.Message }

// InvalidSpec is a ReconcileError of kind KindInvalidSpec, its message formatted.
func InvalidSpec(format string, args ...any) error {
	return &ReconcileError{KindInvalidSpec, fmt.Sprintf(format, args...)}
}

// Transient is a ReconcileError of kind KindTransient, its message formatted.
func Transient(format string, args ...any) error {
	return &ReconcileError{KindTransient, fmt.Sprintf(format, args...)}
}

// Failed is a ReconcileError of kind KindFailed, its message formatted.
func Failed(format string, args ...any) error {
	return &ReconcileError{KindFailed, fmt.Sprintf(format, args...)}
}
