package crdwatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// recheck is how often a Watch looks again for a CRD that was not
// installed (the agent or an operator may install it later).
const recheck = 30 * time.Second

// Watch is an informer on a custom resource that starts only once the
// API server serves the resource, so a cluster without the CRD is not
// flooded with failing list calls. Safe for concurrent use.
type Watch struct {
	ctx    context.Context
	gvr    schema.GroupVersionResource
	client kubernetes.Interface
	dyn    dynamic.Interface
	poke   cache.ResourceEventHandler

	mu   sync.Mutex
	inf  informers.GenericInformer
	next time.Time
}

// New watches gvr through dyn once client's discovery says it is served;
// handler gets the informer's events. ctx bounds the informer.
func New(ctx context.Context, gvr schema.GroupVersionResource, client kubernetes.Interface, dyn dynamic.Interface, handler cache.ResourceEventHandler) *Watch {
	return &Watch{ctx: ctx, gvr: gvr, client: client, dyn: dyn, poke: handler}
}

// informer returns the synced informer, or nil while the resource is not
// served. It starts (and waits for) the informer the first time it is.
func (w *Watch) informer() (informers.GenericInformer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inf != nil || time.Now().Before(w.next) {
		return w.inf, nil
	}
	if ok, _ := Served(w.client, w.gvr); !ok { // checked again after recheck
		w.next = time.Now().Add(recheck)
		return nil, nil
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(w.dyn, 0)
	inf := f.ForResource(w.gvr)
	reg, err := inf.Informer().AddEventHandler(w.poke)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.gvr.Resource, err)
	}
	f.Start(w.ctx.Done())
	go func() { <-w.ctx.Done(); f.Shutdown() }()
	if !cache.WaitForCacheSync(w.ctx.Done(), inf.Informer().HasSynced, reg.HasSynced) {
		return nil, fmt.Errorf("sync %s: %w", w.gvr.Resource, w.ctx.Err())
	}
	w.inf = inf
	return inf, nil
}

// List returns every object (none while the resource is not served).
func (w *Watch) List() ([]*unstructured.Unstructured, error) {
	inf, err := w.informer()
	if inf == nil || err != nil {
		return nil, err
	}
	objs, err := inf.Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", w.gvr.Resource, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// Get returns the named object; found is false when absent or not served.
func (w *Watch) Get(name string) (*unstructured.Unstructured, bool, error) {
	return w.lookup(name, func(l cache.GenericLister) (runtime.Object, error) { return l.Get(name) })
}

// lookup returns what get finds in the watch's cache (key names it in
// errors); found is false when absent or not served.
func (w *Watch) lookup(key string, get func(cache.GenericLister) (runtime.Object, error)) (*unstructured.Unstructured, bool, error) {
	inf, err := w.informer()
	if inf == nil || err != nil {
		return nil, false, err
	}
	obj, err := get(inf.Lister())
	if errors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false, fmt.Errorf("%s %s: unexpected type %T", w.gvr.Resource, key, obj)
	}
	return u, true, nil
}

// Served reports whether the API server serves a resource; err says why
// it could not tell (a group version the server does not know is simply
// not served).
func Served(c kubernetes.Interface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if errors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// GetIn returns the named object of a namespace; found is false when absent
// or not served.
func (w *Watch) GetIn(namespace, name string) (*unstructured.Unstructured, bool, error) {
	return w.lookup(namespace+"/"+name, func(l cache.GenericLister) (runtime.Object, error) { return l.ByNamespace(namespace).Get(name) })
}
