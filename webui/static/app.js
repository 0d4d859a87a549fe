// Tessera dashboard. Plain ES2017, no libraries: it reads /ui/api/* from the
// server that sent it and draws tables and inline SVG charts. Every string
// from the server goes into the page as text (textContent), never as HTML.
(function () {
  'use strict';

  var SVG = 'http://www.w3.org/2000/svg';
  var FINAL = { succeeded: 1, failed: 1, stopped: 1, lost: 1, preempted: 1 };

  var state = {
    snap: null,       // the latest Snapshot
    samples: [],      // chart history, oldest first
    historyLast: '',  // time of the newest history sample held
    fetching: false,
    offset: 0,        // server clock minus this browser's, ms
    updates: 0,
    view: 'overview',
    shown: 500,       // workload rows drawn; "show more" adds PAGE
    gpuShown: 64      // GPU cards drawn; "show more" adds GPU_PAGE
  };

  // The page draws at most this many rows of a list at once: a table of
  // thousands of rows takes seconds to lay out, at every update.
  var PAGE = 500, PENDING_ROWS = 100;
  // The GPU view draws GPU cards a page at a time, and at most NODE_ROWS
  // nodes in its nodes table; MAX_SAMPLED_GPUS is webui.MaxSampledGPUs.
  var GPU_PAGE = 64, NODE_ROWS = 200, MAX_SAMPLED_GPUS = 256;

  function cluster() { return document.body.getAttribute('data-scope') === 'cluster'; }
  // workloadWord names a workload: a pod in a cluster, a job on a host.
  function workloadWord() { return cluster() ? 'Pod' : 'Job'; }
  function serverWord() { return cluster() ? 'scheduler' : 'daemon'; }

  function $(id) { return document.getElementById(id); }

  // el builds an element: attrs (className, dataset via 'data-*', title...)
  // and children (strings become text nodes).
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) { return; }
        if (k === 'className') { e.className = v; } else { e.setAttribute(k, String(v)); }
      });
    }
    append(e, kids);
    return e;
  }
  function append(e, kids) {
    if (kids === undefined || kids === null) { return; }
    if (!Array.isArray(kids)) { kids = [kids]; }
    kids.forEach(function (k) {
      if (k === undefined || k === null || k === false) { return; }
      e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
    });
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    return e;
  }
  function clear(e) { while (e.firstChild) { e.removeChild(e.firstChild); } }

  // ---- formatting -------------------------------------------------------

  // share renders thousandths of a GPU as a decimal: 250 -> "0.25".
  function share(m) {
    var s = (m / 1000).toFixed(3).replace(/0+$/, '').replace(/\.$/, '');
    return s === '-0' ? '0' : s;
  }
  function gpus(m) { return share(m) + ' GPU'; }
  // mib renders MiB with the largest binary unit exact to one decimal.
  function mib(v) {
    if (v !== 0 && v % 1048576 === 0) { return (v / 1048576) + 'Ti'; }
    if (v >= 1024 && (v * 10) % 1024 === 0) {
      return (v % 1024 === 0 ? String(v / 1024) : (v / 1024).toFixed(1)) + 'Gi';
    }
    if (v >= 1048576) { return (v / 1048576).toFixed(2) + 'Ti'; }
    if (v >= 1024) { return (v / 1024).toFixed(1) + 'Gi'; }
    return v + 'Mi';
  }
  function pct(a, b) { return b > 0 ? Math.round(100 * a / b) + '%' : '–'; }
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  // dur renders a duration in ms: "45s", "3m 05s", "2h 07m", "3d 4h".
  function dur(ms) {
    if (!(ms >= 0)) { ms = 0; }
    var s = Math.floor(ms / 1000);
    if (s < 60) { return s + 's'; }
    var m = Math.floor(s / 60);
    if (m < 60) { return m + 'm ' + pad(s % 60) + 's'; }
    var h = Math.floor(m / 60);
    if (h < 48) { return h + 'h ' + pad(m % 60) + 'm'; }
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }
  // when renders a timestamp: the time today, else the date and time.
  function when(t) {
    if (!t) { return '–'; }
    var d = new Date(t);
    var n = new Date(serverNow());
    var hms = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    if (d.toDateString() === n.toDateString()) { return hms; }
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + hms;
  }
  function serverNow() { return Date.now() + state.offset; }
  function ms(t) { return t ? Date.parse(t) : NaN; }

  // colour of a workload, stable across updates.
  function hue(id) {
    var h = 0;
    for (var i = 0; i < id.length; i++) { h = (h * 31 + id.charCodeAt(i)) % 360; }
    return 'hsl(' + ((h * 47) % 360) + ', 62%, 48%)';
  }

  function stateBadge(s) {
    var label = s === 'queued' ? 'waiting' : s;
    return el('span', { className: 'badge st-' + s, 'data-state': s }, label);
  }

  // durationOf says how long a workload has run, waited, or ran.
  function durationOf(w) {
    var now = serverNow();
    if (w.state === 'running' && w.started) { return 'running ' + dur(now - ms(w.started)); }
    if (w.state === 'queued') { return 'waiting ' + dur(now - ms(w.submitted)); }
    if (w.finished) {
      var from = w.started ? ms(w.started) : ms(w.submitted);
      return (w.started ? 'ran ' : 'waited ') + dur(ms(w.finished) - from);
    }
    return '–';
  }

  function gpuKey(node, index) { return node + '/' + index; }

  // ---- overview ---------------------------------------------------------

  function card(label, value, sub, id) {
    return el('div', { className: 'card', id: id }, [
      el('div', { className: 'label' }, label),
      el('div', { className: 'value' }, value),
      el('div', { className: 'sub' }, sub || '\u00a0')
    ]);
  }

  // useText is a use figure with where it comes from: "0.42 measured",
  // "0.3 simulated" (never shown as measured), or why nothing measures it.
  function useText(u) {
    if (!u) { return null; }
    if (u.busyMilli !== undefined) { return share(u.busyMilli) + ' ' + (u.source === 'simulated' ? 'simulated' : 'measured'); }
    return u.reason || 'not metered';
  }

  function idleText(i) {
    return i ? 'idle since ' + when(i.since) : '';
  }

  // totalUse is a Capacity's (or a queue's) use: measured and simulated
  // apart, never added together, or not metered.
  function totalUse(c) {
    var parts = [];
    if (c.measuredMilli !== undefined) { parts.push(share(c.measuredMilli) + ' measured'); }
    if (c.simulatedMilli !== undefined) { parts.push(share(c.simulatedMilli) + ' simulated'); }
    return parts.length ? parts.join(' + ') : 'not metered';
  }

  function renderCards(s) {
    var t = s.totals;
    var models = s.models.map(function (m) { return m.gpus + '× ' + m.model; }).join(', ');
    var c = $('cards');
    clear(c);
    append(c, [
      card('GPUs', String(t.gpus), models || 'none', 'card-gpus'),
      card('Guaranteed allocated', share(t.guaranteedMilli) + ' / ' + share(t.capacityMilli),
        pct(t.guaranteedMilli, t.capacityMilli) + ' of the compute, booked by running workloads', 'card-guaranteed'),
      card('Burst limit', share(t.limitMilli), 'GPUs the running workloads may use when others idle', 'card-burst'),
      card('Used', totalUse(t),
        t.measuredMilli !== undefined ? 'GPU time the running workloads used, measured (NVML)' + (t.simulatedMilli !== undefined ? '; simulated GPUs apart' : '') :
          (t.simulatedMilli !== undefined ? 'simulated from the jobs\' declared load, not measured' : 'no GPU utilisation meter here'), 'card-measured'),
      card('Memory booked', mib(t.memoryBookedMiB) + ' / ' + mib(t.memoryMiB), pct(t.memoryBookedMiB, t.memoryMiB), 'card-memory'),
      card('Running', String(t.running), t.finished + ' finished', 'card-running'),
      card('Waiting', String(t.waiting), t.waiting ? 'see Waiting below' : 'nothing waits', 'card-waiting')
    ]);
    var f = s.fragmentation;
    if (f) {
      append(c, [card('Fragmented', share(f.milli) + ' / ' + share(f.freeMilli),
        pct(f.milli, f.freeMilli) + ' of the free compute the typical pods (' + f.typicalShapes + ' shapes) could not use', 'card-fragmented')]);
    }
  }

  function barCell(value, total, text, cls) {
    var fill = el('span');
    fill.style.width = Math.max(0, Math.min(100, total > 0 ? 100 * value / total : 0)) + '%';
    return el('div', { className: 'barcell' }, [el('div', { className: 'bar' + (cls ? ' ' + cls : '') }, fill), el('span', { className: 'txt' }, text)]);
  }

  function emptyRow(tbody, cols, text) {
    tbody.appendChild(el('tr', null, el('td', { className: 'empty', colspan: cols }, text)));
  }

  function renderModels(s) {
    var tb = $('models').tBodies[0];
    clear(tb);
    s.models.forEach(function (m) {
      tb.appendChild(el('tr', { 'data-model': m.model }, [
        el('td', { className: 'nowrap' }, m.model),
        el('td', { className: 'num' }, String(m.gpus)),
        el('td', null, barCell(m.guaranteedMilli, m.capacityMilli, share(m.guaranteedMilli) + ' of ' + share(m.capacityMilli) + ' GPU')),
        el('td', { className: 'num' }, share(m.limitMilli)),
        el('td', { className: 'num' }, totalUse(m)),
        el('td', null, barCell(m.memoryBookedMiB, m.memoryMiB, mib(m.memoryBookedMiB) + ' of ' + mib(m.memoryMiB), 'mem'))
      ]));
    });
    if (!s.models.length) { emptyRow(tb, 6, 'no GPUs'); }
  }

  function amount(m, memMiB, none) {
    var parts = [];
    if (m > 0) { parts.push(gpus(m)); }
    if (memMiB > 0) { parts.push(mib(memMiB)); }
    return parts.length ? parts.join(', ') : none;
  }

  // queueUse is what a queue's running workloads used of their GPUs
  // (measured, else simulated), beside its guarantee.
  function queueUse(q) {
    if (!q.running) { return '–'; }
    var u = totalUse(q);
    // The part of the guarantee used, when one kind of figure makes it.
    var v = q.measuredMilli === undefined ? q.simulatedMilli : (q.simulatedMilli === undefined ? q.measuredMilli : undefined);
    if (v !== undefined && q.guaranteedMilli > 0) { u += ' (' + pct(v, q.guaranteedMilli) + ' of guarantee)'; }
    return u;
  }

  function renderQueues(s) {
    var tb = $('queues').tBodies[0];
    clear(tb);
    s.queues.forEach(function (q) {
      var used = amount(q.usedMilli, q.usedMemoryMiB, '0');
      tb.appendChild(el('tr', { 'data-queue': q.name }, [
        el('td', { className: 'nowrap' }, [q.name, q.parent ? el('span', { className: 'muted' }, ' in ' + q.parent) : null, q.configured ? null : el('span', { className: 'muted' }, ' (auto)')]),
        el('td', { className: 'num' }, String(q.priority)),
        el('td', { className: 'num' }, String(q.weight)),
        el('td', { className: 'num' }, amount(q.guaranteedMilli, q.guaranteedMemoryMiB, '–')),
        el('td', { className: 'num' }, amount(q.limitMilli, q.limitMemoryMiB, 'none')),
        el('td', null, q.guaranteedMilli > 0 ? barCell(q.usedMilli, q.guaranteedMilli, used + ' (' + pct(q.usedMilli, q.guaranteedMilli) + ' of guarantee)') : used),
        el('td', { className: 'num measured' }, queueUse(q)),
        el('td', { className: 'num share' }, q.share.toFixed(2)),
        el('td', { className: 'num' }, String(q.running)),
        el('td', { className: 'num' }, String(q.waiting))
      ]));
    });
    if (!s.queues.length) { emptyRow(tb, 10, 'no queues in use'); }
  }

  function renderPending(s) {
    var tb = $('pending').tBodies[0];
    clear(tb);
    $('pending-count').textContent = s.pending.length ? '(' + s.pending.length + ')' : '';
    s.pending.slice(0, PENDING_ROWS).forEach(function (p) {
      tb.appendChild(el('tr', { 'data-job': p.id }, [
        el('td', { className: 'num' }, String(p.position)),
        el('td', { className: 'id' }, p.id),
        el('td', { className: 'nowrap' }, p.queue),
        el('td', { className: 'num' }, String(p.priority)),
        el('td', { className: 'nowrap' }, p.request),
        el('td', { className: 'dur', 'data-since': p.submitted }, dur(serverNow() - ms(p.submitted))),
        el('td', { className: 'reason' }, p.reason)
      ]));
    });
    if (!s.pending.length) { emptyRow(tb, 7, 'no workload waits'); }
    if (s.pending.length > PENDING_ROWS) {
      emptyRow(tb, 7, (s.pending.length - PENDING_ROWS) + ' more wait behind these: the Workloads view lists them all (state: waiting)');
    }
  }

  function renderNotes(s) {
    var n = $('notes');
    clear(n);
    (s.notes || []).forEach(function (t) { n.appendChild(el('div', { className: 'note' }, t)); });
  }

  // ---- GPUs -> shares ---------------------------------------------------

  // renderNodes draws the cluster's nodes table (none for a host).
  function renderNodes(s) {
    var nodes = s.nodes || [];
    $('nodes-box').hidden = !nodes.length;
    if (!nodes.length) { return; }
    var tb = $('nodes').tBodies[0];
    clear(tb);
    $('node-count').textContent = '(' + nodes.length + ')';
    nodes.slice(0, NODE_ROWS).forEach(function (n) {
      var st = n.ready ? (n.cordoned ? 'ready, cordoned' : 'ready') : (n.cordoned ? 'not ready, cordoned' : 'not ready');
      var link = el('a', { href: '#gpus', 'data-node': n.name }, n.name);
      link.addEventListener('click', function (e) {
        e.preventDefault();
        var sel = $('filter-node');
        sel.value = n.name;
        state.gpuShown = GPU_PAGE;
        renderGPUs(state.snap);
      });
      tb.appendChild(el('tr', { 'data-node': n.name }, [
        el('td', { className: 'id' }, link),
        el('td', { className: 'nowrap' }, el('span', { className: 'badge ' + (n.ready && !n.cordoned ? 'st-running' : 'st-failed') }, st)),
        el('td', { className: 'num gpus' }, String(n.gpus)),
        el('td', { className: 'guaranteed' }, n.gpus ? barCell(n.gpu.guaranteedMilli, n.gpu.capacityMilli, share(n.gpu.guaranteedMilli) + ' of ' + share(n.gpu.capacityMilli)) : '–'),
        el('td', { className: 'num limit' }, n.gpus ? share(n.gpu.limitMilli) : '–'),
        el('td', { className: 'mem' }, n.gpus ? barCell(n.gpu.memoryBookedMiB, n.gpu.memoryMiB, mib(n.gpu.memoryBookedMiB) + ' of ' + mib(n.gpu.memoryMiB), 'mem') : '–'),
        el('td', { className: 'num' }, share(n.freeCpuMilli) + ' / ' + share(n.cpuMilli)),
        el('td', { className: 'num' }, mib(n.freeMemoryMiB) + ' / ' + mib(n.memoryMiB)),
        el('td', { className: 'num pods' }, String(n.pods)),
        el('td', { className: 'nowrap muted' }, n.source)
      ]));
    });
    if (nodes.length > NODE_ROWS) {
      emptyRow(tb, 10, (nodes.length - NODE_ROWS) + ' more nodes: pick one in the Node filter below to see its GPUs');
    }
  }

  function gpuCard(g, gi, multi, pts) {
    var name = (multi ? g.node + ' ' : '') + 'GPU ' + g.index;
    var stack = el('div', { className: 'stack', title: 'guaranteed shares; the dashed line is the burst limit, the green strip the measured grant' });
    var left = 0;
    g.shares.forEach(function (sh) {
      var seg = el('div', { className: 'seg', 'data-job': sh.workload, title: sh.workload + ': guaranteed ' + share(sh.guaranteedMilli) + ', limit ' + share(sh.limitMilli) }, sh.workload);
      seg.style.left = (left / 10) + '%';
      seg.style.width = (sh.guaranteedMilli / 10) + '%';
      seg.style.background = hue(sh.workload);
      left += sh.guaranteedMilli;
      stack.appendChild(seg);
    });
    if (g.limitMilli > g.guaranteedMilli) {
      var b = el('div', { className: 'burst' });
      b.style.left = '0';
      b.style.width = Math.min(100, g.limitMilli / 10) + '%';
      stack.appendChild(b);
    }
    var used = g.measuredMilli !== undefined ? g.measuredMilli : g.simulatedMilli;
    if (used !== undefined) {
      var m = el('div', { className: 'meas' + (g.measuredMilli === undefined ? ' sim' : '') });
      m.style.width = Math.min(100, used / 10) + '%';
      stack.appendChild(m);
    }
    var memFill = el('span');
    memFill.style.width = (g.memoryMiB > 0 ? Math.min(100, 100 * g.memoryBookedMiB / g.memoryMiB) : 0) + '%';
    var health = null;
    if (g.health && g.health !== 'Healthy') {
      health = el('span', { className: 'badge health st-failed', title: g.healthReason || '' }, g.health + (g.unschedulable ? ', not scheduled on' : ''));
    }
    var card = el('article', { className: 'gpu', 'data-gpu': gpuKey(g.node, g.index), 'data-node': g.node, 'data-index': g.index }, [
      el('header', null, [el('h3', null, name), el('span', { className: 'model' }, g.model), el('span', { className: 'muted' }, mib(g.memoryMiB)), health, el('span', { className: 'uuid' }, g.uuid)]),
      el('div', { className: 'rowlabel' }, [
        el('span', { className: 'compute-text' }, 'compute: guaranteed ' + share(g.guaranteedMilli) + ' of 1 · burst limit ' + share(g.limitMilli)),
        el('span', { className: 'use-text' }, 'used ' + (g.use ? useText(g.use) : totalUse(g)))
      ]),
      stack,
      el('div', { className: 'rowlabel' }, [el('span', { className: 'mem-text' }, 'memory booked ' + mib(g.memoryBookedMiB) + ' of ' + mib(g.memoryMiB)), el('span', null, pct(g.memoryBookedMiB, g.memoryMiB))]),
      el('div', { className: 'bar mem' }, memFill)
    ]);
    if (g.mig && g.mig.length) {
      card.appendChild(el('div', { className: 'rowlabel mig' }, [el('span', null, 'MIG instances: ' + g.mig.map(function (x) { return x.profile + (x.inUse ? ' (in use)' : ' (free)'); }).join(', '))]));
    }
    if (g.shares.length) {
      var rows = g.shares.map(function (sh) {
        var a = sh.arbiter;
        var meas = !a ? (cluster() ? 'not metered' : 'not registered') : (a.metered ? share(a.grantedMilli) + ' (' + a.phase + ')' : 'not metered (' + a.phase + ')');
        if (sh.use) { meas = useText(sh.use); }
        var usedMem = sh.memoryUsedMiB === undefined ? '–' : mib(sh.memoryUsedMiB);
        return el('tr', { className: 'share-row', 'data-job': sh.workload }, [
          el('td', { className: 'id' }, [el('span', { className: 'swatch' }), sh.workload]),
          el('td', { className: 'nowrap' }, sh.queue),
          el('td', { className: 'num guaranteed' }, sh.migProfile ? 'MIG ' + sh.migProfile : share(sh.guaranteedMilli)),
          el('td', { className: 'num limit' }, sh.migProfile ? '–' : share(sh.limitMilli)),
          el('td', { className: 'num measured', title: a ? 'node arbiter: granted ' + share(a.grantedMilli) + ' (' + a.phase + ')' : '' }, meas),
          el('td', { className: 'idle' }, sh.idle ? el('span', { className: 'badge idle', title: 'its use stayed below the idle threshold' }, idleText(sh.idle)) : '–'),
          el('td', { className: 'num mem' }, mib(sh.memoryMiB) + ' / cap ' + mib(sh.memoryLimitMiB)),
          el('td', { className: 'num used' }, usedMem)
        ]);
      });
      rows.forEach(function (r, i) { r.querySelector('.swatch').style.background = hue(g.shares[i].workload); });
      card.appendChild(el('table', { className: 'grid shares' }, [
        el('thead', null, el('tr', null, [el('th', null, workloadWord()), el('th', null, 'Queue'), el('th', { className: 'num' }, 'Guaranteed'), el('th', { className: 'num' }, 'Limit'), el('th', { className: 'num' }, 'Used (GPU time)'), el('th', null, 'Idle'), el('th', { className: 'num' }, 'Memory / cap'), el('th', { className: 'num' }, 'Memory used')])),
        el('tbody', null, rows)
      ]));
    } else {
      card.appendChild(el('div', { className: 'idle' }, 'idle: no workload holds a share'));
    }
    var spark = svg('svg', { 'class': 'spark', viewBox: '0 0 200 36', preserveAspectRatio: 'none' });
    var gp = pts.filter(function (p) { return p.gpus; }).map(function (p) { return { t: ms(p.t), v: p.gpus[gi] || 0 }; });
    if (gp.length > 1) {
      var t0 = gp[0].t, t1 = gp[gp.length - 1].t, span = Math.max(1, t1 - t0);
      var d = gp.map(function (p, i) { return (i ? 'L' : 'M') + (200 * (p.t - t0) / span).toFixed(1) + ',' + (34 - 32 * p.v / 1000).toFixed(1); }).join('');
      spark.appendChild(svg('path', { d: d }));
    }
    spark.setAttribute('data-points', String(gp.length));
    var spanText = gp.length > 1 ? 'last ' + dur(gp[gp.length - 1].t - gp[0].t) : (pts.length > 1 && !gp.length ? 'not kept for over ' + MAX_SAMPLED_GPUS + ' GPUs (see Prometheus)' : 'collecting');
    card.appendChild(el('div', { className: 'rowlabel' }, [el('span', null, 'guaranteed over time'), el('span', null, spanText)]));
    card.appendChild(spark);
    return card;
  }

  function renderGPUs(s) {
    renderNodes(s);
    var list = $('gpu-list');
    clear(list);
    var nodes = {};
    s.gpus.forEach(function (g) { nodes[g.node] = true; });
    var names = Object.keys(nodes).sort();
    var multi = names.length > 1;
    var sel = $('filter-node');
    $('gpu-filters').hidden = !multi;
    fillSelect(sel, names);
    var f = multi ? sel.value : '';
    var pts = chartPoints();
    var drawn = 0, matching = 0;
    s.gpus.forEach(function (g, gi) {
      if (f && g.node !== f) { return; }
      matching++;
      if (drawn >= state.gpuShown) { return; }
      drawn++;
      list.appendChild(gpuCard(g, gi, multi, pts));
    });
    $('gpu-count').textContent = (drawn < matching ? 'first ' + drawn + ' of ' : '') + matching + ' GPUs' + (f ? ' on ' + f : '') + ', of ' + s.gpus.length;
    var more = $('gpu-more');
    more.hidden = drawn >= matching;
    more.textContent = 'Show ' + Math.min(GPU_PAGE, matching - drawn) + ' more GPUs';
    if (!s.gpus.length) { list.appendChild(el('p', { className: 'muted' }, 'no GPUs')); }
  }

  // ---- workloads --------------------------------------------------------

  function fillSelect(sel, values, label) {
    // Rebuilt only when the values change: a cluster's lists are long.
    var sig = values.join('\n');
    if (sel.tesseraSig === sig) { return; }
    sel.tesseraSig = sig;
    var keep = sel.value;
    var fixed = sel.getAttribute('data-fixed');
    if (fixed === null) { sel.setAttribute('data-fixed', String(sel.options.length)); fixed = sel.options.length; }
    while (sel.options.length > Number(fixed)) { sel.remove(sel.options.length - 1); }
    values.forEach(function (v) { sel.appendChild(el('option', { value: v }, label ? label(v) : v)); });
    sel.value = keep;
    if (sel.value !== keep) { sel.value = ''; }
  }

  function matches(w, f) {
    if (f.state === 'live' && FINAL[w.state]) { return false; }
    if (f.state === 'finished' && !FINAL[w.state]) { return false; }
    if (f.state && f.state !== 'live' && f.state !== 'finished' && w.state !== f.state) { return false; }
    if (f.queue && w.queue !== f.queue) { return false; }
    if (f.gpu && !(w.gpus || []).some(function (g) { return gpuKey(w.node || '', g.index) === f.gpu; })) { return false; }
    if (f.text) {
      var hay = (w.id + ' ' + (w.command || '') + ' ' + (w.reason || '')).toLowerCase();
      if (hay.indexOf(f.text) < 0) { return false; }
    }
    return true;
  }

  function renderWorkloads(s) {
    var queues = {}, gpuSet = {};
    s.workloads.forEach(function (w) { queues[w.queue] = true; });
    s.queues.forEach(function (q) { queues[q.name] = true; });
    // The GPU filter lists the GPUs some listed workload holds or held
    // (a cluster has thousands), in the snapshot's order.
    var held = {}, gpuKeys = [];
    s.workloads.forEach(function (w) { (w.gpus || []).forEach(function (x) { held[gpuKey(w.node || '', x.index)] = true; }); });
    s.gpus.forEach(function (g) {
      var k = gpuKey(g.node, g.index);
      if (!held[k]) { return; }
      gpuKeys.push(k);
      gpuSet[k] = 'GPU ' + g.index + ' (' + g.model + ')' + (g.node ? ' on ' + g.node : '');
    });
    fillSelect($('filter-queue'), Object.keys(queues).sort());
    fillSelect($('filter-gpu'), gpuKeys, function (k) { return gpuSet[k]; });
    var f = { state: $('filter-state').value, queue: $('filter-queue').value, gpu: $('filter-gpu').value, text: $('filter-text').value.trim().toLowerCase() };
    var tb = $('workloads').tBodies[0];
    clear(tb);
    var shown = s.workloads.filter(function (w) { return matches(w, f); });
    shown.slice(0, state.shown).forEach(function (w) {
      var g = (w.gpus || []).map(function (x) {
        var what = x.migProfile ? 'MIG ' + x.migProfile : share(x.guaranteedMilli) + (x.limitMilli > x.guaranteedMilli ? ' (limit ' + share(x.limitMilli) + ')' : '');
        if (x.use && x.use.busyMilli !== undefined && x.use.busyMilli !== null) { what += ', used ' + useText(x.use); }
        return (cluster() && w.node ? w.node + ' ' : '') + 'GPU ' + x.index + ': ' + what;
      }).join(', ');
      var outcome = w.reason || '';
      if (FINAL[w.state] && w.exitCode !== undefined && outcome.indexOf('exit') < 0) { outcome = 'exit ' + w.exitCode + (outcome ? '; ' + outcome : ''); }
      tb.appendChild(el('tr', { 'data-job': w.id, 'data-state': w.state }, [
        el('td', { className: 'id' }, w.id),
        el('td', { className: 'state' }, w.idle ? [stateBadge(w.state), ' ', el('span', { className: 'badge idle', title: 'an idle holder: its use stayed below the idle threshold on every GPU it holds' }, idleText(w.idle))] : stateBadge(w.state)),
        el('td', { className: 'nowrap' }, w.queue),
        el('td', { className: 'num' }, String(w.priority)),
        el('td', { className: 'nowrap' }, w.request),
        el('td', { className: 'nowrap gpus' }, g || '–'),
        el('td', { className: 'time', title: w.submitted }, when(w.submitted)),
        el('td', { className: 'time', title: w.started || '' }, when(w.started)),
        el('td', { className: 'dur', 'data-job': w.id }, durationOf(w)),
        el('td', { className: 'reason' }, outcome || '–'),
        el('td', { className: 'cmd', title: w.command || '' }, w.command || '')
      ]));
    });
    if (!shown.length) { emptyRow(tb, 11, s.workloads.length ? 'no workload matches the filters' : 'no workloads yet'); }
    var omitted = s.workloadsOmitted ? ' (and ' + s.workloadsOmitted + ' older finished ones the ' + serverWord() + ' did not send)' : '';
    var drawn = Math.min(shown.length, state.shown);
    $('workload-count').textContent = (drawn < shown.length ? 'first ' + drawn + ' of ' : '') + shown.length + ' matching, of ' + s.workloads.length + omitted;
    var more = $('show-more');
    more.hidden = drawn >= shown.length;
    more.textContent = 'Show ' + Math.min(PAGE, shown.length - drawn) + ' more';
  }

  // ticking durations between updates
  function tick() {
    if (!state.snap) { return; }
    var byID = {};
    state.snap.workloads.forEach(function (w) { byID[w.id] = w; });
    Array.prototype.forEach.call(document.querySelectorAll('#workloads td.dur'), function (td) {
      var w = byID[td.getAttribute('data-job')];
      if (w) { td.textContent = durationOf(w); }
    });
    Array.prototype.forEach.call(document.querySelectorAll('#pending td.dur'), function (td) {
      td.textContent = dur(serverNow() - ms(td.getAttribute('data-since')));
    });
  }

  // ---- charts -----------------------------------------------------------

  // chartPoints is the history plus the live snapshot as the newest point.
  function chartPoints() {
    var pts = state.samples.slice();
    if (state.snap && state.snap.sample) {
      var live = state.snap.sample;
      var last = pts.length ? ms(pts[pts.length - 1].t) : -Infinity;
      if (ms(live.t) > last) { pts.push(live); }
    }
    return pts;
  }

  function legend(id, items) {
    var l = $(id);
    clear(l);
    items.forEach(function (it) {
      var sw = el('i');
      sw.style.background = it[1];
      l.appendChild(el('span', null, [sw, it[0]]));
    });
  }

  // lineChart draws series ({key, cls, area, values: [number|null]}) over
  // times ts into the svg, with a y axis from 0 to yMax.
  function lineChart(box, ts, series, yMax, yFmt) {
    var W = Math.max(300, Math.round(box.clientWidth || 600)), H = Math.max(120, Math.round(box.clientHeight || 190));
    var L = 40, R = 8, T = 8, B = 20;
    clear(box);
    box.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    box.setAttribute('data-points', String(ts.length));
    if (!ts.length) {
      var e = svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', 'class': 'empty' });
      e.textContent = 'no samples yet';
      box.appendChild(e);
      return;
    }
    var t0 = ts[0], t1 = ts[ts.length - 1];
    // A history of a few seconds is drawn over a minute, not stretched.
    if (t1 - t0 < 5000) { t0 = t1 - 60000; }
    var x = function (t) { return L + (W - L - R) * (t - t0) / (t1 - t0); };
    var y = function (v) { return T + (H - T - B) * (1 - v / yMax); };
    var i, v;
    for (i = 0; i <= 4; i++) {
      v = yMax * i / 4;
      box.appendChild(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), 'class': 'grid-line' }));
      var lab = svg('text', { x: L - 4, y: y(v) + 3, 'text-anchor': 'end', 'class': 'axis' });
      lab.textContent = yFmt(v);
      box.appendChild(lab);
    }
    for (i = 0; i <= 4; i++) {
      var t = t0 + (t1 - t0) * i / 4;
      var d = new Date(t);
      var tl = svg('text', { x: x(t), y: H - 5, 'text-anchor': i === 0 ? 'start' : (i === 4 ? 'end' : 'middle'), 'class': 'axis' });
      tl.textContent = pad(d.getHours()) + ':' + pad(d.getMinutes()) + (t1 - t0 < 600000 ? ':' + pad(d.getSeconds()) : '');
      box.appendChild(tl);
    }
    series.forEach(function (s) {
      var path = '', area = '', started = false, first = 0, lastX = 0;
      s.values.forEach(function (val, k) {
        if (val === null || val === undefined) { started = false; return; }
        var px = x(ts[k]).toFixed(1), py = y(val).toFixed(1);
        if (!started) { path += 'M' + px + ',' + py; if (!area) { first = px; } started = true; } else { path += 'L' + px + ',' + py; }
        area += (area ? 'L' : 'M') + px + ',' + py;
        lastX = px;
      });
      if (!path) { return; }
      if (s.area && area) {
        box.appendChild(svg('path', { d: area + 'L' + lastX + ',' + y(0).toFixed(1) + 'L' + first + ',' + y(0).toFixed(1) + 'Z', 'class': 'a-' + s.cls }));
      }
      // A lone point draws as a short dash so it shows.
      if (path.indexOf('L') < 0) { path += 'l2,0'; }
      box.appendChild(svg('path', { d: path, 'class': 's-' + s.cls, 'data-series': s.key }));
    });
  }

  function renderCharts() {
    var pts = chartPoints();
    var ts = pts.map(function (p) { return ms(p.t); });
    var cap = 0, anyMeas = false, anySim = false, maxJobs = 1;
    pts.forEach(function (p) {
      cap = Math.max(cap, p.capacityMilli / 1000, p.limitMilli / 1000);
      if (p.measuredMilli !== undefined) { anyMeas = true; }
      if (p.simulatedMilli !== undefined) { anySim = true; }
      maxJobs = Math.max(maxJobs, p.running, p.waiting);
    });
    var allocSeries = [
      { key: 'capacity', cls: 'cap', values: pts.map(function (p) { return p.capacityMilli / 1000; }) },
      { key: 'guaranteed', cls: 'guar', area: true, values: pts.map(function (p) { return p.guaranteedMilli / 1000; }) },
      { key: 'burst', cls: 'burst', values: pts.map(function (p) { return p.limitMilli / 1000; }) }
    ];
    var items = [['capacity', 'var(--cap)'], ['guaranteed', 'var(--guar)'], ['burst limit', 'var(--burst)']];
    if (anyMeas) {
      allocSeries.push({ key: 'measured', cls: 'meas', values: pts.map(function (p) { return p.measuredMilli === undefined ? null : p.measuredMilli / 1000; }) });
      items.push(['measured', 'var(--meas)']);
    }
    if (anySim) {
      allocSeries.push({ key: 'simulated', cls: 'sim', values: pts.map(function (p) { return p.simulatedMilli === undefined ? null : p.simulatedMilli / 1000; }) });
      items.push(['simulated use', 'var(--sim)']);
    }
    legend('legend-alloc', items);
    lineChart($('chart-alloc'), ts, allocSeries, Math.max(1, cap), function (v) { return v % 1 === 0 ? String(v) : v.toFixed(1); });
    legend('legend-jobs', [['running', 'var(--run)'], ['waiting', 'var(--wait)']]);
    var top = Math.max(4, Math.ceil(maxJobs * 1.1 / 4) * 4);
    lineChart($('chart-jobs'), ts, [
      { key: 'running', cls: 'run', area: true, values: pts.map(function (p) { return p.running; }) },
      { key: 'waiting', cls: 'wait', values: pts.map(function (p) { return p.waiting; }) }
    ], top, function (v) { return String(Math.round(v)); });
  }

  // ---- data flow ---------------------------------------------------------

  function render() {
    var s = state.snap;
    if (!s) { return; }
    document.title = s.title + ' · ' + s.totals.running + ' running · ' + s.totals.waiting + ' waiting';
    $('summary').textContent = s.source + ' · ' + s.totals.gpus + ' GPUs · ' + s.totals.running + ' running · ' + s.totals.waiting + ' waiting';
    renderNotes(s);
    renderCards(s);
    renderModels(s);
    renderQueues(s);
    renderPending(s);
    renderGPUs(s);
    renderWorkloads(s);
    renderCharts();
  }

  function apply(s) {
    state.snap = s;
    state.offset = Date.parse(s.time) - Date.now();
    state.updates++;
    document.body.setAttribute('data-updates', String(state.updates));
    var last = s.history && s.history.last;
    if (last && last !== state.historyLast) { fetchHistory(); }
    var t0 = window.performance ? performance.now() : 0;
    render();
    if (window.performance) { document.body.setAttribute('data-render-ms', (performance.now() - t0).toFixed(1)); }
    var live = $('live');
    live.setAttribute('data-state', 'live');
    $('live-text').textContent = 'live · updated ' + when(s.time);
  }

  function fetchHistory() {
    if (state.fetching) { return; }
    state.fetching = true;
    var url = '/ui/api/history' + (state.historyLast ? '?since=' + encodeURIComponent(state.historyLast) : '');
    fetch(url, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) { throw new Error('history: HTTP ' + r.status); }
      return r.json();
    }).then(function (h) {
      state.samples = state.samples.concat(h.samples || []);
      var keep = Math.max(1, Math.round(h.spanSeconds / h.intervalSeconds));
      if (state.samples.length > keep) { state.samples = state.samples.slice(state.samples.length - keep); }
      if (state.samples.length) { state.historyLast = state.samples[state.samples.length - 1].t; }
      renderCharts();
      if (state.snap) { renderGPUs(state.snap); }
    }).catch(function (e) {
      console.warn('tessera: ' + e.message);
    }).then(function () { state.fetching = false; });
  }

  function down(text) {
    $('live').setAttribute('data-state', 'down');
    $('live-text').textContent = text;
  }

  function poll() {
    fetch('/ui/api/snapshot', { cache: 'no-store' }).then(function (r) { return r.json(); })
      .then(apply, function () { down('cannot reach the ' + serverWord() + '; retrying'); })
      .then(function () { setTimeout(poll, 5000); });
  }

  function connect() {
    if (!window.EventSource) { poll(); return; }
    var es = new EventSource('/ui/api/events');
    es.addEventListener('snapshot', function (ev) {
      try { apply(JSON.parse(ev.data)); } catch (e) { console.warn('tessera: bad snapshot: ' + e.message); }
    });
    es.addEventListener('failure', function (ev) {
      var msg = 'the ' + serverWord() + ' could not read its state';
      try { msg = JSON.parse(ev.data).error; } catch (e) { /* keep the default */ }
      down(msg);
    });
    es.onerror = function () { down('disconnected; reconnecting…'); };
  }

  // ---- views --------------------------------------------------------------

  function show(view) {
    if (['overview', 'gpus', 'workloads'].indexOf(view) < 0) { view = 'overview'; }
    state.view = view;
    Array.prototype.forEach.call(document.querySelectorAll('.tabs button'), function (b) {
      b.setAttribute('aria-selected', String(b.getAttribute('data-view') === view));
    });
    Array.prototype.forEach.call(document.querySelectorAll('section.view'), function (sec) {
      sec.hidden = sec.getAttribute('data-view') !== view;
    });
    if (view === 'overview') { renderCharts(); }
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll('.tabs button'), function (b) {
      b.addEventListener('click', function () {
        var v = b.getAttribute('data-view');
        if (location.hash !== '#' + v) { history.replaceState(null, '', '#' + v); }
        show(v);
      });
    });
    window.addEventListener('hashchange', function () { show(location.hash.slice(1)); });
    ['filter-state', 'filter-queue', 'filter-gpu'].forEach(function (id) {
      $(id).addEventListener('change', function () { if (state.snap) { renderWorkloads(state.snap); } });
    });
    $('filter-text').addEventListener('input', function () { if (state.snap) { renderWorkloads(state.snap); } });
    $('filter-node').addEventListener('change', function () { state.gpuShown = GPU_PAGE; if (state.snap) { renderGPUs(state.snap); } });
    $('gpu-filters').addEventListener('submit', function (e) { e.preventDefault(); });
    $('gpu-more').addEventListener('click', function () {
      state.gpuShown += GPU_PAGE;
      if (state.snap) { renderGPUs(state.snap); }
    });
    if (cluster()) {
      Array.prototype.forEach.call(document.querySelectorAll('th.wl'), function (th) { th.textContent = workloadWord(); });
      $('workloads').querySelector('th.cmd-h').textContent = 'Details';
      $('filter-text').setAttribute('placeholder', 'pod, details or reason');
    }
    $('show-more').addEventListener('click', function () {
      state.shown += PAGE;
      if (state.snap) { renderWorkloads(state.snap); }
    });
    $('filters').addEventListener('submit', function (e) { e.preventDefault(); });
    window.addEventListener('resize', function () { if (state.view === 'overview') { renderCharts(); } });
    show(location.hash.slice(1) || 'overview');
    setInterval(tick, 1000);
    fetchHistory();
    connect();
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
}());
