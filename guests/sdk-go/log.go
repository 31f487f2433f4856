package wasmop

import (
	"fmt"
	"os"
)

// Level is the level of a log line.
type Level int

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

var levelNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// logger is the host's log in a component (set by package component), stderr natively.
var logger = func(level Level, message string) {
	fmt.Fprintf(os.Stderr, "%s %s\n", level, message)
}

// SetLogger replaces where Log writes; package component points it at the host.
func SetLogger(f func(Level, string)) { logger = f }

// Log writes a line to the host's log (stderr in native tests).
func Log(level Level, message string) { logger(level, message) }
