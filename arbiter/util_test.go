package arbiter

import (
	"strconv"

	"github.com/tessera-gpu/tessera/arbiter/rate"
)

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func rateGain(g float64) rate.Config { return rate.Config{Gain: g} }
