// The application's traffic, charted with uPlot (bundled into the page: MIT, one small module, a
// canvas per chart): sends and the pushes' outcomes and opens per hour over the last 7 days (GET
// /api/v1/stats/hourly), and the open rate of the last 30 notifications. Each chart says its totals
// in words too, for a screen reader and for a test.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { HourStats, Notification } from '../api.ts';
import { ErrorNote } from '../components.tsx';
import { useLoad } from '../context.ts';
import { formatNumber } from '../format.ts';
import { titleOf } from './notifications.tsx';

const hourMs = 3_600_000;
const colours = { sends: '#2557d6', accepted: '#1f7a4d', failed: '#b3261e', skipped: '#8892a6', opens: '#d9a02b' };

/** A uPlot chart as wide as its box, redrawn at the box's width when the window changes. */
function Plot({ options, data }: { options: Omit<uPlot.Options, 'width' | 'height'>; data: uPlot.AlignedData }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const height = () => (window.innerWidth <= 640 ? 200 : 240);
  useEffect(() => {
    const element = box.current!;
    plot.current = new uPlot({ ...options, width: element.clientWidth, height: height() }, data, element);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: element.clientWidth, height: height() }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
    // The options are fixed for a chart's life; new data is set below.
  }, []);
  useEffect(() => plot.current?.setData(data), [data]);
  return <div class="chart-canvas" ref={box} />;
}

const bars = uPlot.paths.bars!({ size: [0.7, 24] });
const count = (_u: uPlot, value: number | null) => (value === null ? '—' : formatNumber(value));

function hourlyOptions(series: (keyof typeof colours)[], asBars: boolean): Omit<uPlot.Options, 'width' | 'height'> {
  return {
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [{}, { size: 50, values: (_u, ticks) => ticks.map((tick) => (Number.isInteger(tick) ? formatNumber(tick) : '')) }],
    series: [
      {},
      ...series.map((name) => ({
        label: name,
        stroke: colours[name],
        fill: asBars ? colours[name] : undefined,
        width: asBars ? 0 : 2,
        paths: asBars ? bars : undefined,
        points: { show: false },
        value: count,
      })),
    ],
  };
}

export function HourlyCharts() {
  // The hour now is still filling: the 7 days end with it. Read again every minute while shown.
  const stats = useLoad((herald) => {
    const to = new Date((Math.floor(Date.now() / hourMs) + 1) * hourMs);
    return herald.hourlyStats({ from: new Date(to.getTime() - 7 * 24 * hourMs), to });
  }, 'hourly', 60_000);
  const rows: HourStats[] = stats.data ?? [];
  const x = rows.map((row) => Date.parse(row.hour) / 1000);
  const sum = (key: keyof Omit<HourStats, 'hour'>) => rows.reduce((total, row) => total + row[key], 0);
  if (stats.error) return <ErrorNote error={stats.error} ability="notifications:read" />;
  if (!stats.data) return <p class="loading">Loading the charts…</p>;
  return (
    <>
      <figure class="chart" aria-labelledby="sends-chart-heading">
        <h3 id="sends-chart-heading">Sends per hour, last 7 days</h3>
        <Plot options={hourlyOptions(['sends'], true)} data={[x, rows.map((row) => row.sends)]} />
        <figcaption class="hint chart-summary">{formatNumber(sum('sends'))} notifications sent in 7 days.</figcaption>
      </figure>
      <figure class="chart" aria-labelledby="pushes-chart-heading">
        <h3 id="pushes-chart-heading">Pushes and opens per hour, last 7 days</h3>
        <Plot
          options={hourlyOptions(['accepted', 'failed', 'skipped', 'opens'], false)}
          data={[x, rows.map((row) => row.accepted), rows.map((row) => row.failed), rows.map((row) => row.skipped), rows.map((row) => row.opens)]}
        />
        <figcaption class="hint chart-summary">
          In 7 days: {formatNumber(sum('accepted'))} pushes accepted, {formatNumber(sum('failed'))} failed, {formatNumber(sum('skipped'))} skipped,{' '}
          {formatNumber(sum('opens'))} opened.
        </figcaption>
      </figure>
    </>
  );
}

/** Opened of accepted, in percent; null when nothing was accepted (no rate to speak of). */
export const openRate = (notification: Notification): number | null =>
  notification.statistics.accepted > 0 ? Math.round((notification.statistics.opened / notification.statistics.accepted) * 1000) / 10 : null;

export function OpenRateChart() {
  const list = useLoad((herald) => herald.listNotifications({ limit: 30 }), 'open-rates', 60_000);
  if (list.error) return <ErrorNote error={list.error} ability="notifications:read" />;
  if (!list.data) return null;
  // Oldest first, left to right, as the hourly charts run.
  const notifications = [...list.data.data].reverse();
  const rates = notifications.map(openRate);
  const rated = rates.filter((rate): rate is number => rate !== null);
  const options: Omit<uPlot.Options, 'width' | 'height'> = {
    scales: { x: { time: false }, y: { range: [0, 100] } },
    axes: [{ values: (_u, ticks) => ticks.map((tick) => (Number.isInteger(tick) ? String(tick) : '')) }, { size: 50, values: (_u, ticks) => ticks.map((tick) => `${tick} %`) }],
    series: [
      { label: 'notification', value: (_u, index) => (index === null ? '—' : (notifications[index - 1] ? titleOf(notifications[index - 1]) : '—')) },
      { label: 'open rate', stroke: colours.opens, fill: colours.opens, width: 0, paths: bars, points: { show: false }, value: (_u, rate) => (rate === null ? '—' : `${rate} %`) },
    ],
  };
  return (
    <figure class="chart" aria-labelledby="open-rate-heading">
      <h3 id="open-rate-heading">Open rate of the last {notifications.length} notifications</h3>
      <Plot options={options} data={[notifications.map((_, index) => index + 1), rates]} />
      <figcaption class="hint chart-summary">
        Opened of accepted, oldest on the left.{' '}
        {rated.length ? `Average ${Math.round((rated.reduce((a, b) => a + b, 0) / rated.length) * 10) / 10} % over the ${rated.length} with accepted pushes.` : 'No push accepted yet.'}
      </figcaption>
    </figure>
  );
}
