#!/bin/sh
# Refuses to start the fleet while a secret of .env is missing, still the example's placeholder
# (.env.example's change-me...), or short: whoever knows the Redis password makes every worker run
# commands, the console's token cancels and resumes runs, Flower's password kills tasks.
# docker-compose.yml runs it (service `secrets`) before Redis starts, and everything else waits for
# Redis. It names what to fix and never prints a secret. Checked by tests/unit/test_deploy_secrets.py.
#
#   sh docker/check-secrets.sh            # with the secrets in the environment
set -u

MIN_LENGTH=16
HINT="python -c \"import secrets; print(secrets.token_urlsafe(32))\""
failed=0

refuse() {
    echo "jury: $1 in .env $2: set a long random secret ($HINT)" >&2
    failed=1
}

check() {
    name=$1
    value=$2
    lowered=$(printf '%s' "$value" | tr '[:upper:]' '[:lower:]')
    case "$lowered" in
        "") refuse "$name" "is empty" ;;
        *change-me*) refuse "$name" "is still the example's placeholder (change-me)" ;;
        *)
            if [ "${#value}" -lt "$MIN_LENGTH" ]; then
                refuse "$name" "is shorter than $MIN_LENGTH characters"
            fi
            ;;
    esac
}

check JURY_REDIS_PASSWORD "${JURY_REDIS_PASSWORD-}"
check JURY_WEB_TOKEN "${JURY_WEB_TOKEN-}"
case "${FLOWER_BASIC_AUTH-}" in
    *:*) check "FLOWER_BASIC_AUTH's password" "${FLOWER_BASIC_AUTH#*:}" ;;
    *) refuse FLOWER_BASIC_AUTH "is not user:password" ;;
esac
exit "$failed"
