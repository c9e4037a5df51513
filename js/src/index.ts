import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, IThemeManager } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';

/* eslint-disable jupyter/prefer-lazy-imports -- activate() builds all three at once */
import { Folds, TrainWatchPanel } from './panel/panel';
import { TrainWatchStatus } from './status';
import { StreamClient } from './stream';
/* eslint-enable jupyter/prefer-lazy-imports */

const PLUGIN_ID = 'trainwatch-lab:plugin';

export namespace CommandIDs {
  export const open = 'trainwatch-lab:open';
}

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <path class="jp-icon3" fill="currentColor"
    d="M3 3h2v16h16v2H3V3zm4 11 4-5 3 3 5-7 1.6 1.2-6.4 9-3-3-2.6 3.2L7 14z"/>
</svg>`;

export const trainwatchIcon = new LabIcon({ name: 'trainwatch-lab:icon', svgstr: ICON_SVG });

/**
 * TrainWatch in JupyterLab: a status-bar item and a side panel fed by the server extension's
 * sample stream (so it keeps updating while every kernel is busy).
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Live storage and GPU charts with plain-language warnings.',
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer, ISettingRegistry, IStatusBar, IThemeManager],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    themeManager: IThemeManager | null
  ) => {
    const stream = new StreamClient();
    const panel = new TrainWatchPanel(stream);
    panel.title.icon = trainwatchIcon;
    app.shell.add(panel, 'right', { rank: 900 });
    restorer?.add(panel, 'trainwatch-lab-panel');

    app.commands.addCommand(CommandIDs.open, {
      label: 'TrainWatch: Open panel',
      caption: 'Live storage and GPU charts with warnings',
      icon: trainwatchIcon,
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => app.shell.activateById(panel.id)
    });
    palette?.addItem({ command: CommandIDs.open, category: 'TrainWatch' });

    if (statusBar) {
      const item = new TrainWatchStatus(stream, () => {
        void app.commands.execute(CommandIDs.open);
      });
      statusBar.registerStatusItem('trainwatch-lab:status', {
        item,
        align: 'left',
        rank: 100
      });
    }

    themeManager?.themeChanged.connect(() => {
      // the new theme's CSS variables apply on the next frame
      requestAnimationFrame(() => panel.restyle());
    });

    const apply = (settings: ISettingRegistry.ISettings) => {
      const refresh = Number(settings.get('refreshInterval').composite) || 0;
      const windowS = Number(settings.get('historyWindow').composite) || 600;
      stream.setInterval(refresh);
      panel.setWindow(windowS, Math.max(1, refresh));
      panel.fleet.configure(
        Number(settings.get('fleetWindow').composite) || 3600,
        Number(settings.get('fleetRefreshInterval').composite) || 15
      );
      panel.setFolds((settings.get('sections').composite as Folds | undefined) ?? {});
    };
    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          apply(settings);
          settings.changed.connect(apply);
          // what the reader opens or folds is kept with the other settings
          panel.onFoldsChanged = folds => {
            settings.set('sections', folds).catch(reason => {
              console.warn('trainwatch-lab: the open sections were not saved', reason);
            });
          };
        })
        .catch(reason => console.error('trainwatch-lab: settings failed to load', reason));
    }

    void app.restored.then(() => stream.connect());
    // exposed for debugging and the browser test (messages/bytes counters)
    (window as any).trainwatchLab = { stream, panel };
  }
};

export default plugin;
