#!/bin/sh
# The bench's fake agent: sleeps the durations the bench drew for it, then answers (no model is called).
#
#     agent.sh REVIEW1 REVIEW2 REPLY TRIAGE FIND PROMPT_FILE
#
# A review of round 1 sleeps REVIEW1, of a later round REVIEW2; with FIND = 1 it reports one finding in
# round 1 and none after. A triage sleeps TRIAGE and rejects with evidence; a reply sleeps REPLY and does
# not contest. A shell script, not Python: an interpreter's start-up (tens of milliseconds on a loaded
# box, eight times a PR) is no part of the workload, and the bench measures Jury, not its stand-ins.
# Sleeping is the workload: it stands for a model.
review1=$1 review2=$2 reply=$3 triage=$4 find=$5 prompt=$6
IFS= read -r first < "$prompt" || true
case "$first" in
"# Jury triage"*)
    sleep "$triage"
    printf '%s\n' '{"verdict": "rejected", "reproduced": false, "reason": "not a bug", "evidence": "median([1, 2]) ok", "test": null, "test_command": null}'
    ;;
"# Jury reply"*)
    sleep "$reply"
    echo "NO CONTEST"
    ;;
*" round 1")
    sleep "$review1"
    if [ "$find" = 1 ]; then
        echo "FINDING: median() of an even-length list returns the upper middle value"
        echo "WHERE: stats.py:1"
    else
        echo "NO NEW FINDINGS"
    fi
    ;;
*)
    sleep "$review2"
    echo "NO NEW FINDINGS"
    ;;
esac
