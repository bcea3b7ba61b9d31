package dashq

import "testing"

func TestOwnSeries(t *testing.T) {
	for _, c := range []struct {
		expr, own string
		ok        bool
	}{
		{`sum(rate(a_total[1m])) or (0 * group(b_total))`, `sum(rate(a_total[1m]))`, true},
		{`sum by (x, y) (rate(a_total[1m])) or on (x) (0 * group by (x) (g))`, `sum by (x, y) (rate(a_total[1m]))`, true},
		// Not a zero fallback: kept whole.
		{`sum(rate(a_total[1m]))`, `sum(rate(a_total[1m]))`, false},
		{`a or b`, `a or b`, false},
		{`a or (1 * b)`, `a or (1 * b)`, false},
		{`a or (b * 0)`, `a or (b * 0)`, false},
	} {
		own, ok, err := OwnSeries(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if own != c.own || ok != c.ok {
			t.Errorf("OwnSeries(%s) = %q, %v; want %q, %v", c.expr, own, ok, c.own, c.ok)
		}
	}
	if _, _, err := OwnSeries(`sum(`); err == nil {
		t.Error("OwnSeries(`sum(`): no error")
	}
}
