// Package share is the arbiter's pure allocation core: given the clients of
// one GPU, each with a guaranteed and a limit share (thousandths of the GPU)
// and a demand for the next period, it computes every client's time share.
//
// The policy is weighted fair sharing by guarantee with water-filling: each
// client first gets min(guarantee, demand); what is left of the GPU is then
// handed out in proportion to guarantees among clients still below
// min(limit, demand), until the GPU is fully handed out or every client is
// satisfied. It is work-conserving (an idle client's share goes to busy ones),
// never exceeds a limit, and a busy client always gets at least its
// guarantee, because admission keeps guarantees summing to at most 1000.
// A client that lends its guarantee (an idle holder, Client.Lends) comes in
// with its floor as its guarantee and is filled last, from what the others
// leave below their limits.
//
// It owns only arithmetic on thousandths. It must not read clocks, files or
// devices, and it must not know about tokens (package rate translates shares
// into launch tokens).
package share
