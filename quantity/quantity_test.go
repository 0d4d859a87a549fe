package quantity

import (
	"errors"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "0", want: 0},
		{in: "1024", want: 1024},
		{in: "1Ki", want: 1024},
		{in: "20Gi", want: 20 << 30},
		{in: "1.5Gi", want: 3 << 29},
		{in: "512Mi", want: 512 << 20},
		{in: "2Ti", want: 2 << 40},
		{in: "1G", want: 1e9},
		{in: "1e9", want: 1e9},
		{in: "1E3k", want: 1e6},
		{in: " 4Gi ", want: 4 << 30},
		{in: "+4Mi", want: 4 << 20},
		{in: "", err: "empty value"},
		{in: "-1Gi", err: "must not be negative"},
		{in: "abc", err: "not a number"},
		{in: "Gi", err: "not a number"},
		{in: "1.5", err: "not a whole number of bytes"},
		{in: "20GB", err: `unknown unit "GB"`},
		{in: "20gi", err: `unknown unit "gi"`},
		{in: "1/2Gi", err: `unknown unit "/2Gi"`},
		{in: "NaN", err: "not a number"},
		{in: "Inf", err: "not a number"},
		{in: "0x10", err: `unknown unit "x10"`},
		{in: "9999999Pi", err: "too large"},
		{in: "1e9999", err: "exponent too large"},
	}
	for _, tc := range tests {
		got, err := ParseBytes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrSyntax) {
				t.Errorf("ParseBytes(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseMiBRoundsUp(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "1Mi": 1, "1025Ki": 2, "20Gi": 20480, "0": 0} {
		if got, err := ParseMiB(in); err != nil || got != want {
			t.Errorf("ParseMiB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseShare(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "0.25", want: 250},
		{in: "25%", want: 250},
		{in: "250m", want: 250},
		{in: "1", want: 1000},
		{in: "2", want: 2000},
		{in: "12.5%", want: 125},
		{in: ".5", want: 500},
		{in: "0.001", want: 1},
		{in: "0", want: 0},
		{in: "0.0001", err: "finer than a thousandth"},
		{in: "0.5m", err: "finer than a thousandth"},
		{in: "12.55%", err: "finer than a thousandth"},
		{in: "-0.5", err: "must not be negative"},
		{in: "half", err: "not a number"},
		{in: "0.5x", err: `unknown unit "x"`},
		{in: "50 %", err: `unknown unit " %"`},
		{in: "", err: "empty value"},
	}
	for _, tc := range tests {
		got, err := ParseShare(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseShare(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShare(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for mib, want := range map[int64]string{81920: "80Gi", 1536: "1.5Gi", 512: "512Mi", 143771: "143771Mi", 1 << 20: "1Ti", 0: "0Mi"} {
		if got := FormatMiB(mib); got != want {
			t.Errorf("FormatMiB(%d) = %q, want %q", mib, got, want)
		}
	}
	for milli, want := range map[int64]string{250: "0.25", 1000: "1", 125: "0.125", 0: "0", 2500: "2.5"} {
		if got := FormatShare(milli); got != want {
			t.Errorf("FormatShare(%d) = %q, want %q", milli, got, want)
		}
	}
}

// FuzzParse checks that the parsers never panic, that accepted values are
// non-negative, and that a formatted share parses back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"20Gi", "0.25", "25%", "250m", "1e9", "-1", "1.5Gi", "", "1/2", "9e999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if b, err := ParseBytes(s); err == nil && b < 0 {
			t.Fatalf("ParseBytes(%q) = %d < 0", s, b)
		}
		if m, err := ParseShare(s); err == nil {
			if m < 0 {
				t.Fatalf("ParseShare(%q) = %d < 0", s, m)
			}
			back, err := ParseShare(FormatShare(m))
			if err != nil || back != m {
				t.Fatalf("round trip of %q: %d -> %q -> %d, %v", s, m, FormatShare(m), back, err)
			}
		}
	})
}
