package wasmop

import (
	"fmt"
	"slices"
)

// Operation is what an [AdmissionRequest] asks to do.
type Operation int

const (
	// OperationCreate creates an object.
	OperationCreate Operation = iota
	// OperationUpdate updates an object.
	OperationUpdate
	// OperationDelete deletes an object.
	OperationDelete
)

// AdmissionRequest is a create, update or delete of an object of the primary kind, to be
// allowed or not by [Validator.Validate].
type AdmissionRequest struct {
	Operation Operation
	// Object is the object as it would be stored; nil on delete.
	Object Object
	// OldObject is the object before, on update and delete; nil on create.
	OldObject Object
	// User is the user asking.
	User string
	// DryRun says that nothing will be stored (kubectl apply --dry-run=server).
	DryRun bool
}

// FieldError is what is wrong with one field.
type FieldError struct {
	// Path is the field's path, e.g. spec.schedule.
	Path string
	// Value is the value refused (encoded as JSON); nil leaves it out of the message.
	Value any
	// Detail says why.
	Detail string
}

// Verdict is the answer of [Validator.Validate]: [Allow], [Deny] or [Invalid], with
// warnings added by [Verdict.Warn].
type Verdict struct {
	Allowed bool
	// Fields says, for a refusal, what is wrong with which field. The host words the
	// refusal as the API server words an invalid object.
	Fields []FieldError
	// Message is, for a refusal with no field to blame, the message; empty for none.
	Message string
	// Warnings are shown to the client (kubectl prints them), allowed or not.
	Warnings []string
}

// Allow allows the operation.
func Allow() Verdict { return Verdict{Allowed: true} }

// Deny refuses the operation, its message formatted.
func Deny(format string, args ...any) Verdict {
	return Verdict{Message: fmt.Sprintf(format, args...)}
}

// Invalid refuses the operation for what is wrong with these fields.
func Invalid(fields ...FieldError) Verdict { return Verdict{Fields: fields} }

// Warn returns v with a warning added (v itself unchanged).
func (v Verdict) Warn(warning string) Verdict {
	v.Warnings = append(slices.Clip(v.Warnings), warning)
	return v
}
