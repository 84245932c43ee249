// The operator UI's only script of its own (served as is: no build step). It draws the overview's
// chart with uPlot and the request page's journal timeline; htmx does everything else.
(() => {
  const chartEl = document.getElementById('chart');
  if (chartEl && window.uPlot) {
    let plot;
    const draw = async () => {
      const res = await fetch(chartEl.dataset.series, { credentials: 'same-origin' });
      if (!res.ok) return;
      const s = await res.json();
      const data = [s.t, s.settledPerS, s.httpPerS, s.latencyMeanMs];
      if (!plot) {
        plot = new window.uPlot(
          {
            width: Math.max(400, chartEl.clientWidth - 10),
            height: 220,
            series: [
              {},
              { label: 'settled/s', stroke: '#1f6feb', width: 2 },
              { label: 'HTTP/s', stroke: '#12b76a', width: 2 },
              { label: 'latency ms (mean)', stroke: '#f79009', width: 2, scale: 'ms' },
            ],
            axes: [{}, { label: 'per second' }, { side: 1, scale: 'ms', label: 'ms', grid: { show: false } }],
          },
          data,
          chartEl,
        );
      } else plot.setData(data);
    };
    draw();
    setInterval(draw, 3000);
  }

  const timeline = document.getElementById('timeline');
  if (timeline) {
    fetch(timeline.dataset.events, { credentials: 'same-origin' })
      .then((res) => res.json())
      .then((body) => {
        timeline.textContent = '';
        if (!body.enabled) {
          timeline.textContent = 'journal not enabled';
          return;
        }
        if (!body.events.length) {
          timeline.textContent = 'No journal events.';
          return;
        }
        const list = document.createElement('ol');
        for (const event of body.events) {
          const item = document.createElement('li');
          const { at, type, ...rest } = event;
          item.textContent = `${at ?? ''} ${type ?? ''} ${JSON.stringify(rest)}`;
          list.appendChild(item);
        }
        timeline.appendChild(list);
      })
      .catch((err) => {
        timeline.textContent = `journal unavailable: ${err}`;
      });
  }
})();

// A form marked `data-reset` (the Credentials page's) is emptied once htmx posted it successfully:
// its secrets are sent once and do not stay in the page.
document.body.addEventListener('htmx:afterRequest', (event) => {
  const form = event.detail.elt.closest?.('form[data-reset]');
  if (form && event.detail.successful && !event.detail.xhr.responseText.includes('flash err')) form.reset();
});
