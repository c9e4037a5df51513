import 'uplot/dist/uPlot.min.css';
import './base.css';
import './fleet.css';
import './replay.css';
