# One image for every tier: the command picks the process (gameserver, webfront, wgctl).
FROM python:3.11-slim
# PYTHONPATH: games that are not installed (examples/, your own) import from /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/app
WORKDIR /app
COPY pyproject.toml README.md Procfile ./
COPY common common
COPY db db
COPY gameapi gameapi
COPY gameserver gameserver
COPY webfront webfront
COPY refgame refgame
COPY wgctl wgctl
COPY bench bench
COPY examples examples
RUN pip install --no-cache-dir .
USER nobody
CMD ["webfront", "--host", "0.0.0.0"]
