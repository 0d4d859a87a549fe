package tracesim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// table is a CSV file read by header name, so that column order and extra
// columns do not matter.
type table struct {
	file   string
	header map[string]int
	rows   [][]string
	lines  []int
}

func readTable(path string, required ...string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	return parseTable(f, path, required...)
}

func parseTable(r io.Reader, name string, required ...string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty file, want a header line with %s", name, strings.Join(required, ","))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	t := &table{file: name, header: map[string]int{}}
	for i, h := range head {
		t.header[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, col := range required {
		if _, ok := t.header[col]; !ok {
			return nil, fmt.Errorf("%s:1: missing column %q (header has %s)", name, col, strings.Join(head, ","))
		}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		t.rows = append(t.rows, rec)
		t.lines = append(t.lines, line)
	}
	return t, nil
}

// str returns row i's value of col ("" when the column or cell is absent).
func (t *table) str(i int, col string) string {
	j, ok := t.header[col]
	if !ok || j >= len(t.rows[i]) {
		return ""
	}
	return strings.TrimSpace(t.rows[i][j])
}

// int returns row i's col as an integer in [lo, hi]; empty cells read as 0
// when allowEmpty.
func (t *table) int(i int, col string, lo, hi int64, allowEmpty bool) (int64, error) {
	s := t.str(i, col)
	if s == "" && allowEmpty {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f == float64(int64(f)) {
			v, err = int64(f), nil
		}
	}
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%s:%d: column %s: %q is not a whole number in [%d, %d]", t.file, t.lines[i], col, s, lo, hi)
	}
	return v, nil
}
