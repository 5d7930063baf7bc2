package catalog

import "log/slog"

func logWarn(msg string, err error, args ...any) {
	if err != nil {
		slog.Warn(msg, append(args, "err", err)...)
	}
}
