import type { Engine } from '../../../engine/port.js';
import type { ConnectionServices } from './context.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { ConnectionHandler, HandlerFactory, SessionInfo } from '../../../session/handler-port.js';
import { ConnectionHandlerImpl } from './connection.js';

/** Opens one engine connection per client connection, so that a long query never stalls the others. */
export class EngineHandlerFactory implements HandlerFactory {
  constructor(
    private readonly engine: Engine,
    private readonly database: string,
    private readonly services: ConnectionServices,
  ) {}

  async open(info: SessionInfo): Promise<ConnectionHandler> {
    if (info.database !== this.database) {
      throw new PgError(
        SqlState.InvalidCatalogName,
        `database "${info.database}" does not exist`,
        {
          hint: `This server has one database, "${this.database}".`,
        },
        'FATAL',
      );
    }
    const conn = await this.engine.connect();
    return ConnectionHandlerImpl.open(conn, info, this.engine.version, this.services);
  }
}
