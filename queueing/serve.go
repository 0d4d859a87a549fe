package queueing

import "sort"

// Serve hands out pending work queue by queue in fair-share order: each
// step takes the head of the queue the ledger puts first (Order), calls
// serve with it and charges what serve returns to that queue. Lists keep
// their own order. Serve stops when every list is empty or serve says stop.
// byQueue is consumed.
func Serve[T any](l *Ledger, byQueue map[string][]T, serve func(queue string, item T) (charge Resources, stop bool)) {
	for len(byQueue) > 0 {
		names := make([]string, 0, len(byQueue))
		for q := range byQueue {
			names = append(names, q)
		}
		sort.Strings(names)
		q := l.Order(names)[0]
		item := byQueue[q][0]
		if byQueue[q] = byQueue[q][1:]; len(byQueue[q]) == 0 {
			delete(byQueue, q)
		}
		charge, stop := serve(q, item)
		l.Charge(q, charge)
		if stop {
			return
		}
	}
}
