package conditions

import "testing"

func TestSetKeepsTheTransitionTimeWhileTheStatusHolds(t *testing.T) {
	previous := []any{New("Ready", true, "A", "", "then", nil)}
	same := Set(nil, previous, New("Ready", true, "B", "", "now", int64(2)))
	if c := same[0].(map[string]any); c["lastTransitionTime"] != "then" || c["reason"] != "B" || c["observedGeneration"] != int64(2) {
		t.Errorf("unchanged status: %v", c)
	}
	changed := Set(nil, previous, New("Ready", false, "B", "", "now", nil))
	if c := changed[0].(map[string]any); c["lastTransitionTime"] != "now" {
		t.Errorf("changed status: %v", c)
	}
	other := New("Other", true, "X", "", "now", nil)
	if got := Set([]any{other, previous[0]}, nil, New("Ready", false, "B", "", "now", nil)); len(got) != 2 || got[0].(map[string]any)["type"] != "Other" {
		t.Errorf("replacing: %v", got)
	}
}
