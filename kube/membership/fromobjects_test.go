package membership

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFromObjects(t *testing.T) {
	store := map[string]*unstructured.Unstructured{
		"ns/good": {Object: map[string]any{"spec": map[string]any{"minMember": int64(3)}}},
		"ns/bad":  {Object: map[string]any{}},
	}
	readErr := errors.New("cache not synced")
	get := func(ns, name string) (*unstructured.Unstructured, bool, error) {
		if name == "unreadable" {
			return nil, false, readErr
		}
		u, ok := store[ns+"/"+name]
		return u, ok, nil
	}
	conv := func(u *unstructured.Unstructured) (int64, error) {
		n, ok, _ := unstructured.NestedInt64(u.Object, "spec", "minMember")
		if !ok {
			return 0, errors.New("spec.minMember: required")
		}
		return n, nil
	}
	read := FromObjects(get, conv)
	for _, tc := range []struct {
		name      string
		want      int64
		wantFound bool
		wantErr   bool
	}{
		{"good", 3, true, false},
		{"missing", 0, false, false},
		{"bad", 0, false, true},
		{"unreadable", 0, false, true},
	} {
		got, found, err := read("ns", tc.name)
		if got != tc.want || found != tc.wantFound || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %d found %v err %v; want %d found %v error %v", tc.name, got, found, err, tc.want, tc.wantFound, tc.wantErr)
		}
	}
}
