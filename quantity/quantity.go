package quantity

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// MiB is one mebibyte in bytes.
const MiB = 1 << 20

// MilliPerUnit is the number of milli-units in one whole GPU.
const MilliPerUnit = 1000

// Syntax errors share this sentinel so callers can tell malformed input from
// out-of-range values.
var ErrSyntax = errors.New("invalid quantity")

// memoryUnit returns the multiplier of a memory suffix.
func memoryUnit(suffix string) (*big.Rat, bool) {
	var n int64
	switch suffix {
	case "":
		n = 1
	case "Ki":
		n = 1 << 10
	case "Mi":
		n = 1 << 20
	case "Gi":
		n = 1 << 30
	case "Ti":
		n = 1 << 40
	case "Pi":
		n = 1 << 50
	case "k":
		n = 1e3
	case "M":
		n = 1e6
	case "G":
		n = 1e9
	case "T":
		n = 1e12
	case "P":
		n = 1e15
	default:
		return nil, false
	}
	return big.NewRat(n, 1), true
}

// ParseBytes parses a memory size with Kubernetes suffixes (Ki, Mi, Gi, Ti, Pi
// binary; k, M, G, T, P decimal; none for bytes). The result must be a whole,
// non-negative number of bytes that fits in an int64.
func ParseBytes(s string) (int64, error) {
	num, suffix, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	mult, ok := memoryUnit(suffix)
	if !ok {
		return 0, fmt.Errorf("%w %q: unknown unit %q (use Ki, Mi, Gi, Ti, Pi, k, M, G, T or P)", ErrSyntax, s, suffix)
	}
	v := new(big.Rat).Mul(num, mult)
	if !v.IsInt() {
		return 0, fmt.Errorf("%w %q: not a whole number of bytes", ErrSyntax, s)
	}
	if !v.Num().IsInt64() {
		return 0, fmt.Errorf("%w %q: too large", ErrSyntax, s)
	}
	return v.Num().Int64(), nil
}

// ParseMiB parses a memory size like ParseBytes and returns it in MiB,
// rounding a partial MiB up (a request for 1.5 KiB needs one MiB).
func ParseMiB(s string) (int64, error) {
	b, err := ParseBytes(s)
	if err != nil {
		return 0, err
	}
	return (b + MiB - 1) / MiB, nil
}

// ParseShare parses a GPU share and returns it in thousandths of a GPU:
// "0.25" and "25%" and "250m" all give 250; "2" gives 2000. Shares finer than
// a thousandth are an error, not rounded.
func ParseShare(s string) (int64, error) {
	num, suffix, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	var v *big.Rat
	switch suffix {
	case "":
		v = new(big.Rat).Mul(num, big.NewRat(MilliPerUnit, 1))
	case "%":
		v = new(big.Rat).Mul(num, big.NewRat(MilliPerUnit, 100))
	case "m":
		v = num
	default:
		return 0, fmt.Errorf("%w %q: unknown unit %q (write 0.25, 25%% or 250m)", ErrSyntax, s, suffix)
	}
	if !v.IsInt() {
		return 0, fmt.Errorf("%w %q: finer than a thousandth of a GPU", ErrSyntax, s)
	}
	if !v.Num().IsInt64() {
		return 0, fmt.Errorf("%w %q: too large", ErrSyntax, s)
	}
	return v.Num().Int64(), nil
}

// FormatMiB renders a MiB amount with the largest binary unit that keeps it
// exact to one decimal ("80Gi", "1.5Gi", "512Mi").
func FormatMiB(mib int64) string {
	switch {
	case mib != 0 && mib%(1<<20) == 0:
		return fmt.Sprintf("%dTi", mib>>20)
	case mib >= 1024 && (mib*10)%1024 == 0:
		if mib%1024 == 0 {
			return fmt.Sprintf("%dGi", mib/1024)
		}
		return fmt.Sprintf("%.1fGi", float64(mib)/1024)
	default:
		return fmt.Sprintf("%dMi", mib)
	}
}

// FormatShare renders thousandths of a GPU as a decimal ("0.25", "1", "0.125").
func FormatShare(milli int64) string {
	s := fmt.Sprintf("%d.%03d", milli/MilliPerUnit, milli%MilliPerUnit)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// splitNumber splits "1.5Gi" into the exact value 1.5 and the suffix "Gi".
// The number is [+]digits[.digits][(e|E)[+|-]digits]; a sign of minus, NaN,
// Inf, hex and fractions like 1/2 are rejected.
func splitNumber(s string) (*big.Rat, string, error) {
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, "", fmt.Errorf("%w: empty value", ErrSyntax)
	}
	if s[0] == '-' {
		return nil, "", fmt.Errorf("%w %q: must not be negative", ErrSyntax, orig)
	}
	i := 0
	if s[0] == '+' {
		i++
	}
	start := i
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return nil, "", fmt.Errorf("%w %q: not a number", ErrSyntax, orig)
	}
	mantissa := s[start:i]
	exp := ""
	// An exponent needs digits after it; "1E" alone is an (unknown) suffix.
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > j {
			if k-j > 3 {
				return nil, "", fmt.Errorf("%w %q: exponent too large", ErrSyntax, orig)
			}
			exp = s[i:k]
			i = k
		}
	}
	num, ok := new(big.Rat).SetString(mantissa + exp)
	if !ok {
		return nil, "", fmt.Errorf("%w %q: not a number", ErrSyntax, orig)
	}
	return num, s[i:], nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
