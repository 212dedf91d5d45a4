"""A session of large events opens over REST (as the console reads it): its pages are bounded by
bytes as well as by count, so a page of 1,000 asked for holds what fits and says so, and the
pages that follow hold the rest — none fails for its size."""

from __future__ import annotations

import httpx

from tests.integration.gateway.support import Api

LARGE = 200 * 1024


async def test_a_session_of_large_events_reads_in_pages_bounded_by_bytes(
    http: httpx.AsyncClient, api: Api
) -> None:
    agent = await api.agent()  # model `mock` with no responses: it echoes its input
    session_id = f"large-{agent.id[:8]}"
    for n in range(12):  # a user message and an echoed answer each: 24 events of 200 KB
        response = await http.post(
            f"{agent.base}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": f"{n:02d}" + "x" * (LARGE - 2)}]},
            headers={**agent.owner.headers, "X-Session-Id": session_id},
        )
        assert response.status_code == 200, response.text

    url = f"/api/v1/projects/{agent.project_id}/sessions/{session_id}/events"
    pages = []
    params = {"page_size": 1000}
    while True:
        response = await http.get(url, params=params, headers=agent.owner.headers)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        if not pages[-1]["next_page_token"]:
            break
        params = {"page_size": 1000, "page_token": pages[-1]["next_page_token"]}

    assert [e["seq"] for page in pages for e in page["events"]] == list(range(1, 25))
    assert len(pages) > 1
    assert all(page["byte_limit_reached"] for page in pages[:-1])
    assert not pages[-1]["byte_limit_reached"]

    by_agent = await http.get(
        f"{agent.base}/memory/events",
        params={"session_id": session_id, "page_size": 1000},
        headers=agent.owner.headers,
    )
    assert by_agent.status_code == 200, by_agent.text
    assert by_agent.json()["byte_limit_reached"] and by_agent.json()["total"] == 24
