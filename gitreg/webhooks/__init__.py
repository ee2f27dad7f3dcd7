"""Forge webhooks and the post-receive notify endpoint (docs/webhooks.md).

    POST /webhooks/github     GitHub (X-Hub-Signature-256)
    POST /webhooks/gitlab     GitLab (X-Gitlab-Token)
    POST /webhooks/gitea      Gitea and Forgejo (X-Gitea-Signature / X-Forgejo-Signature)
    POST /webhooks/bitbucket  Bitbucket Cloud and Data Center (X-Hub-Signature)
    POST /webhooks/git        hooks/post-receive (Authorization: Bearer <notify token>)

One module per forge turns a delivery into a `Delivery`; `http.routes` checks
size and JSON, then asks `gitreg.repositories.service.Repositories` which
repositories the delivery proves it is for and to queue their sync jobs, and answers.
"""
