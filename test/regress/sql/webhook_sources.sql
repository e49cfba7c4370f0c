SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
-- Webhook sources: idem_webhook_source_set and _drop, the view
-- idem_webhook_sources, and idem_webhook_receive.  The secrets and the
-- signed requests are fixed vectors of webhook_verify.sql,
-- webhook_hmac.sql, webhook_forms.sql, webhook_wechatpay.sql and
-- webhook_paypal.sql (copied).
\set stripe_secret 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH'
\set stripe_secret_b 'whsec_Qm7nRk2pLx9TzV4cY8dJ3fH6gW1sA0eB'
\set stripe_t '1700000000'
\set stripe_payload '{"id":"evt_1OE2sL2eZvKYlo2C","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3OE2sL","amount":2000,"currency":"usd"}}}'
\set stripe_sig '06ac76b0c8e7f5bc9d5f9ca481f73cf9a29d58c89a0089d7b6f2e99d32e5475c'
\set std_secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
\set std_id 'msg_p5jXN8AQM9LWM0D4loKWxJek'
\set std_ts '1614265330'
\set std_payload '{"test": 2432232314}'
\set std_sig 'g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='
\set std_pk 'whpk_LtNHoDiHOnxJPZSKwnHYZhKFxHqZ04agIm9vtMDJmWE='
\set gh_secret 'It''s a Secret to Everybody'
\set gh_secret_b 'gh-webhook-secret-2'
\set gh_payload 'Hello, World!'
\set gh_sig '757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'
\set gh_sig_b '5d472512027957372725ea73bd032136eec380e4a49b3d0366b49081e7060f60'
\set shop_secret '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'
\set shop_payload '{"id":820982911946154508,"email":"jon@example.com","total_price":"199.00","currency":"CAD"}'
\set shop_sig 'VcZm48dngI8JMNclt7H+dUqDln91vSCyhjdez0YZZaw='
\set rzp_secret 'rzp-webhook-secret-7Gq2'
\set rzp_payload '{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_DESlfW9H8K9uqM","amount":100,"currency":"INR","status":"captured"}}},"created_at":1567674606}'
\set rzp_sig 'ffef5b82c07cf328b6a3113c3653de5e393f139d6505eb6eb537379ed594f9dc'
\set cko_secret '0b5ec7f5-2b2e-4b71-9d64-0d5a2c4e6a3f'
\set cko_payload '{"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"payment_captured","created_on":"2019-08-23T14:11:23Z","data":{"id":"pay_waji5hpbdevunjifb3uwpl6x2u","amount":6540,"currency":"USD"}}'
\set cko_sig '8df5eba9d24c699712cbd4975a5c91b06df7d3fa62ed6360bdc1fb6be4920f28'
\set pdl_secret 'pdl_ntfset_01hv8wpt2bm0xc3a4smqqq8ns7_4Zx0dNfPCM1c3OLXxz8GqUYX9RqGYpXo'
\set pdl_ts '1671552777'
\set pdl_payload '{"event_id":"evt_01hv8x2a6ssgd0xq9yjc5bn9vq","event_type":"transaction.completed","occurred_at":"2022-12-20T16:12:57.000000Z","notification_id":"ntf_01hv8x2a8c1pq0mw5m5vq3y3y1","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"completed","currency_code":"USD"}}'
\set pdl_sig 'bbf2a6095ab2a252ce6234677af2a4b63270590992cd9fd89faebd2be33565e1'
\set adyen_key '3F1A9C0D5E7B2486A1C3E5F7092B4D6F8A0C2E4F6B8D0A1C3E5F7A9B1D3F5E7C'
\set adyen_psp '8816178914778451'
\set adyen_orig '8816178914771230'
\set adyen_merchant 'IdemShopECOM'
\set adyen_ref 'order-42:café'
\set adyen_value '2599'
\set adyen_currency 'EUR'
\set adyen_event 'REFUND'
\set adyen_success 'true'
\set adyen_sig 'kRCVlOzDf1BJ7acNO+8DcYaq6vwl7fkrjJQXjhNa15Y='
\set adyp_payload '{"data":{"balancePlatform":"YOUR_BALANCE_PLATFORM","accountHolder":{"id":"AH00000000000000000000001","status":"active"}},"environment":"test","timestamp":"2026-11-29T10:00:00+01:00","type":"balancePlatform.accountHolder.created"}'
\set adyp_sig 'vUSIsZU+/wl97j7Rr74Yqz7q4lzgWStMAtRPxUa3Pew='
\set sq_secret 'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9 Ibxx_5AKakO-3qeNVR61Dw'
\set sq_body '{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}'
\set sq_sig 'GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4='
\set psk_secret 'sk_test_4e9f8c1a2b3d5e6f7a8b9c0d1e2f3a4b5c6d7e8f'
\set psk_payload '{"event":"charge.success","data":{"id":302961,"domain":"live","status":"success","reference":"qTPrJoy9Bx","amount":10000,"currency":"NGN","paid_at":"2026-11-29T10:00:00.000Z"}}'
\set psk_sig '23e2c63b7ab8a4b0a7ca6f9ca748d18822b605089fdd61be01f41dcc43c721ee148f8e737025911ae04c0ab7d6201c0037bf7cd91481aacab8dd9d712653164b'
\set awx_secret 'whsec_awx_5f3c9e1d7b2a4c6e8f0a1b3d5c7e9f2a'
\set awx_ts '1764410400123'
\set awx_payload '{"id":"evt_hkdf7zbpkg3uhqgrxqu","name":"payment_intent.succeeded","account_id":"acct_8yTcQmZ9Ta6Lk1Zr6Wb2cQ","data":{"object":{"id":"int_hkdmr2jxpgbm1kdq2te","amount":100.5,"currency":"AUD","status":"SUCCEEDED"}},"created_at":"2026-11-29T10:00:00+0000"}'
\set awx_sig 'd3c5782a6dbc40065ce8065bcfe9a6db2e6b168c737fbbd8b96bdf3493470135'
\set mp_secret '9f1c2e7a4b6d8f0a3c5e7b9d1f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a'
\set mp_ts '1764410400'
\set mp_request_id 'bb56a2f1-6aae-46ac-982e-9dcd3581d08e'
\set mp_payload '{"action":"payment.updated","api_version":"v1","data":{"id":"123456789"},"date_created":"2025-11-29T10:00:00Z","id":118765432101,"live_mode":true,"type":"payment","user_id":2647542}'
\set mp_sig '9f0ada98e313098ee7969e5a1c459db531f09a82023faa34b4679645289c3a2c'
\set alipay_key '-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAp9CRi23TGSjUXxHY6eJQ\nw4ympZyGeXWYvQfKXzAYmc/GXoP/+fP/6bomq/SflX/NFQzFrwvVAOKoknrsviWy\nRSA4SCEWO1I8DONj995Y+7LJcxdZoNvscpTw3aV46+loZlKYRAKeE2NMiEaPfa3z\n9loXNiGhAEGy9HNpDqOwbWdf9r7mnQuiujl71/5685h7GB/QGwIh2ZFTX9uj/p08\nvGOiGHNXmtzcFFQkhd7O7h4yaznBHXkpErkdngwlI8UTP4JX5brrtNfypzhXm0Cu\nBbFr/Sy4kqwza4bjR1z4DoadvucbuR7wNB98mO8S6h7JSiDEg0oDeynC7BlLLcm7\nUwIDAQAB\n-----END PUBLIC KEY-----\n'
\set alipay_form 'gmt_create=2024-01-15+10%3A30%3A00&charset=utf-8&seller_email=merchant%40example.com&subject=%E6%B5%8B%E8%AF%95%E5%95%86%E5%93%81+idem&body=a%2Bb+%26+c%3Dd%2C+100%25&buyer_id=2088102177846880&invoice_amount=88.88&notify_id=2024011500222103030012341234567890&fund_bill_list=%5B%7B%22amount%22%3A%2288.88%22%2C%22fundChannel%22%3A%22ALIPAYACCOUNT%22%7D%5D&notify_type=trade_status_sync&trade_status=TRADE_SUCCESS&receipt_amount=88.88&app_id=2021000000000001&buyer_pay_amount=88.88&seller_id=2088102177649450&gmt_payment=2024-01-15+10%3A30%3A05&notify_time=2024-01-15+10%3A30%3A05&passback_params=&version=1.0&out_trade_no=20240115000001&total_amount=88.88&trade_no=2024011522001446880501234567&auth_app_id=2021000000000001&buyer_logon_id=buy***%40example.com&Zz_case=sorted+first&point_amount=0.00&sign_type=RSA2&sign=Kg%2Bbxj%2BJXREUSGKTYVAm3xFRvmGXIyJAN01iz0iOBEcEiJXuQWZLaGylW%2Bdfobo8gmtGex0y4WtprtSYgv7g9%2FJxow39niQaetM1PcK1nP5XdpAj%2F1VrAvrXgSdPJ49XdVjr1Li6MHo85EXhO7xCJnOWdktLGMV4sf43%2BVbDEC42de0c34sZ%2BPCXNb6VlkmN8AhEfiCRTRHmaMvdKlHgQice0khEWG15CWBhW8yKjeyI%2FdexhP6Rdrc0amc%2FHOZycm7Y663wALzKSFRYtP8tWT2uqKGWC%2BCO%2BzvcmYcsHek2dl0zQEa%2FLUEgkXCC6fjqoDEu1frcOjZCihEIR46fxg%3D%3D'
\set unionpay_root '-----BEGIN CERTIFICATE-----\nMIIDZjCCAk6gAwIBAgIBAjANBgkqhkiG9w0BAQsFADBDMQswCQYDVQQGEwJDTjES\nMBAGA1UECgwJaWRlbSB0ZXN0MSAwHgYDVQQDDBdpZGVtIHRlc3QgVW5pb25QYXkg\ncm9vdDAgFw0yNDAxMDEwMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowQzELMAkGA1UE\nBhMCQ04xEjAQBgNVBAoMCWlkZW0gdGVzdDEgMB4GA1UEAwwXaWRlbSB0ZXN0IFVu\naW9uUGF5IHJvb3QwggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQCOuEEW\nzbIs/LXeqFWJqWAkroCu5WnDRUj/T4Z3zLm5rRVLR/6Hh8sAyKIVijIXL/oVBGQg\np7F8K66dKuNsFck6sf8ewYzOxVoazWXbJUxZJ1lqMWdgLK8eGPHkvYWxu+5P96w1\nAsFMDvlyxVEGOCCQAwR7yH8bDvJy+3lNP0XilcwhjMnZo/rW7MxNr4ACu+HMDETi\ngrwqbEui5ku3F9d0PMWrzYUXFZIa7tE0ySb3uQOgyZ4WKekpd1zldkQfWdrp6+bz\nVO2UcatkTsQlMiN5sHy1G8qZOK8JxuPaf15jM4mXfHVARSVkIwVXsjhwWPJBfFr1\nUSZIk6DbK58axS+DAgMBAAGjYzBhMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/\nBAQDAgEGMB0GA1UdDgQWBBRWbYWIDvCc/yWT35l/4mXvRTWDvDAfBgNVHSMEGDAW\ngBRWbYWIDvCc/yWT35l/4mXvRTWDvDANBgkqhkiG9w0BAQsFAAOCAQEAfdDOzq3P\nOifbRrHIhvpNl6vVZrMq+rCrXftauKeeh+BOwrheGwT58QKJ8XDZyBzr8ODBD76d\n8ANihkvP4TaqogdyGqb0HQ9tAESo8V9pApQ/XY1NmJ2cDhyN6i3n0+UOopKC6yRW\nd49+Q6vmP5+xrv1esgORwlapvNQKfNdxN9ESZussC2XmVx+kdLPiQYm4XUlQ7kgl\ncibXjUq38P38i5BNu0yOXTqWM2KZEoVztbZFUHQ4FmG5AstjL831VmzwidZHm6Ey\nigRs6B4PVDeszsAcrf35yjFbA+2EH6yByQd9NzbWDGP1AxxJnDkwrwXT8nzigbpr\nvtPnCrB5eSQyIw==\n-----END CERTIFICATE-----\n'
\set unionpay_middle '-----BEGIN CERTIFICATE-----\nMIIDZTCCAk2gAwIBAgIBAzANBgkqhkiG9w0BAQsFADBDMQswCQYDVQQGEwJDTjES\nMBAGA1UECgwJaWRlbSB0ZXN0MSAwHgYDVQQDDBdpZGVtIHRlc3QgVW5pb25QYXkg\ncm9vdDAgFw0yNDAxMDEwMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowQjELMAkGA1UE\nBhMCQ04xEjAQBgNVBAoMCWlkZW0gdGVzdDEfMB0GA1UEAwwWaWRlbSB0ZXN0IFVu\naW9uUGF5IE9DQTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoCggEBALl4yeXV\nlbpnDQw59mszXyz8k7jnVEUTCr5s7oAi5tAU9m0r5DFG2sOjyQaJe5kxMaqeE3Sk\nreySOkMT1hvQoRt1+qkRQn8x7MJ4/0UDXwmDspCgM0Za32tnvd7kRr3WILGla4Nr\n2nrLirnvPRAMxw2H619lqBiigesbxM4BdT/+Howm9yOvHHmJF32WlKSzLnnpd8tD\nOdHPYYFBHRGjxDBPcq5k7f0H9pWkR9GpsWZ1vjVXEbvZiiJWqd+aCflmgZLHsA8D\nxzpVHrhUkNnfIlGFDdZUk+QfrHdgeTPBY0rMJu2Js+Db4LFV0V2PD296dQ9SS0aB\nCsYxSS/yofxaQGcCAwEAAaNjMGEwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8E\nBAMCAQYwHQYDVR0OBBYEFKz6mnbQu7xzs0uoSoCsdivB+rpdMB8GA1UdIwQYMBaA\nFFZthYgO8Jz/JZPfmX/iZe9FNYO8MA0GCSqGSIb3DQEBCwUAA4IBAQAm6ChrQJ+k\nWE4kaTD1LOYL3FBdrNLoTY4uVmEPz1lABS1Uoeh5sw5Vo/KRYg0/QXC+aM3qeM9M\nky522/QzSEgLqExVEEij2a+Z06oPRPCLAy2norhOqEqPS17zpu3R9+76EH5yPjo8\ny+FlSOaK1ud1xCRAKaN84OV39fUt4j39K3Ulv3KcFPXNn0rvSl1TA8IXSYZB3f0S\n6RRv7+FZjUF2us/U9iTlY2s+bzScjE9yDBkrD7YZEMq1V9phiGTrnRPN1DQ77FLP\n/u8qkjNzrPZmCFSL++xYGgMJ00JYdg3CxkD2src+g4t71+n9jJX210y+wEe/Q9Wf\ncireMhZVJ91v\n-----END CERTIFICATE-----\n'
\set unionpay_form 'accessType=0&bizType=000201&currencyCode=156&encoding=UTF-8&merId=777290058110048&orderId=20240115000001&queryId=792401151030051234567&reqReserved=%E5%A4%87%E6%B3%A8+a%2Bb%3Dc%26d&respCode=00&respMsg=success&settleAmt=8888&settleCurrencyCode=156&settleDate=0115&signMethod=01&traceNo=123456&traceTime=0115103005&txnAmt=8888&txnSubType=01&txnTime=20240115103000&txnType=01&version=5.1.0&signPubKeyCert=-----BEGIN+CERTIFICATE-----%0AMIIDlTCCAn2gAwIBAgIBBDANBgkqhkiG9w0BAQsFADBCMQswCQYDVQQGEwJDTjES%0AMBAGA1UECgwJaWRlbSB0ZXN0MR8wHQYDVQQDDBZpZGVtIHRlc3QgVW5pb25QYXkg%0AT0NBMCAXDTI0MDEwMTAwMDAwMFoYDzIxMjQwMTAxMDAwMDAwWjB8MQswCQYDVQQG%0AEwJDTjEXMBUGA1UECgwOaWRlbSB0ZXN0IENGQ0ExFDASBgNVBAsMC0VudGVycHJp%0Ac2VzMT4wPAYDVQQDDDUwNDFAWjIwMjQwMTAxQOS4reWbvemTtuiBlOiCoeS7veac%0AiemZkOWFrOWPuEAwMDAwMDAwMTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoC%0AggEBANJTEZ94xC6GZIrT0T8X9t6I%2Fc4N9KYz5y%2Fkkf6qpDQq29n2ajOJua8tz1WU%0AA5KkSHlc2ccrpAOFQz5Nf36gyeC1X0gkp6c62qDV5EBXltVImk3QkxeHyehi5ku7%0AUgjFP8Ex%2FYGMQXysL7ip7g13RLHKMUD6s7kvsG4x4WQrXrPsl2CeA%2B0dZAiKn1LY%0ApXKvLFpzR11Z22PdjdOqljy29V8ctoarKISNw1IRGheVj5IrtmbJVsJ64YDxW52m%0AV5DFqHvlIHmfkyvnKI3VWnAkKWySuvaHSzLm6w6VleXB0oIjjQiP92e%2BmkfHDrB2%0AGxadd5E7daGRRIWCDlXH1uDKRkkCAwEAAaNaMFgwCQYDVR0TBAIwADALBgNVHQ8E%0ABAMCBsAwHQYDVR0OBBYEFNJu4zd%2FR%2BB%2BqROlRWQSmoGOfmKzMB8GA1UdIwQYMBaA%0AFKz6mnbQu7xzs0uoSoCsdivB%2BrpdMA0GCSqGSIb3DQEBCwUAA4IBAQALV8ZLjYN%2B%0ACCi0%2BLu7%2BI0o8EUseKP71U%2BAfbvyN2ti1leFW6zc%2BwmrQ%2FrGfCVyGWMy0OcUins%2F%0AoMcYmX5O5CWVOVHA64fO6EN5l6jrLYDr0z0yAS5tIymSkUiDF7wUFgPI4ysvb%2Fn%2F%0A%2FnRMBFtnDdqw8KYqLT5huxCz7npdPEC18yfOrNJAsLwSCqvy%2B9QLvWpxlHZt0iEc%0A8nSVw%2FpWHIGdOv%2BBjWc5H%2BFJkwR%2Bc5TiD7rRFOy94OQEW29vNmBoJaJAknjV0JCF%0AIWZ5Yg8KO5J2%2F3rLLuWu8mLr6n6gjKtgZwSnRknUSjLgWr9F19mEqNWLl6XDzown%0AS03ZiU2hiH7L%0A-----END+CERTIFICATE-----%0A&signature=MH5Ze8G1ICyLkaj1%2Ff4ebo6o6V3i8oaoXnkDk0cqzu9AdjBIO5oiXcsVfDTAGz%2BBKKtQfGWTVqhj%2FpIR%2FEowbNUVtQIQe0ba3KG%2B2xO01gAFwn0K9T0aEiK7huVxRjuZSSl1OKeavBtTeAaKl5O7VFe5tLlYA52jachnevi0ZO0B4LraHeX2Wjj9pQZe41HIaMyuwE9DCxCJqtOml3Chf5nBs56YHjdPqimVj4QrEB4scyfqRXe83PoA9IuvPYN%2BXoi4gMmu9cKN5drWQcZRkmyxxNFZ6tL3ULDTB4JZfNmHb1GQNV2N0cy1gsJ6H9fDBbtrpG%2Fcp%2BXxmFEE%2BStjFQ%3D%3D'
\set cert_a '-----BEGIN CERTIFICATE-----\nMIIDDDCCAfSgAwIBAgIUCm2OK1w/Th17mgwuT2qLHTxef5AwDQYJKoZIhvcNAQEL\nBQAwQDELMAkGA1UEBhMCQ04xEjAQBgNVBAoMCWlkZW0gdGVzdDEdMBsGA1UEAwwU\naWRlbSB0ZXN0IHBsYXRmb3JtIEEwHhcNMjMwMTAxMDAwMDAwWhcNMzMwMTAxMDAw\nMDAwWjBAMQswCQYDVQQGEwJDTjESMBAGA1UECgwJaWRlbSB0ZXN0MR0wGwYDVQQD\nDBRpZGVtIHRlc3QgcGxhdGZvcm0gQTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCC\nAQoCggEBAMBoKaIioUU51t2zsUSBmfw0IZ/PESwwEKKjxKSt/e2QSt90Y+f8mGfS\nUpzEIMpp6E4t5dUFUwiJVsMhEzMd+GPsUdzqCVtNwi0j0IdVfj1R3XHNgP5RHRBA\nKp6VNsHLSQbTzIbqTySFutH1PL3Hvft6RxJXiMfHVI3TuUCuf+aGUcju4tTmaFnt\ndLEeaSJiuawVDa9MZa9Ag73VdFkSO2eYSvUaSwyIButaRLeqrS9uHrrgoG4KcexL\nTXYKW+GPZvyypi+54W3l261eSyoTJbH8vx2j9W28x56eSXgPZ++2JxBC12RnstJR\ndq81RBzUPSue8ac1PnICNAhd7bsk+ksCAwEAATANBgkqhkiG9w0BAQsFAAOCAQEA\ni9QjnyKnGAMOQNO5IQ/FIPynyDkxmO0SEjG5mPnntHlmDrvs0tvFAfFAbTYSR6ND\nizYcLfRlEQaGx2YwMJGA5wQsHItAVqzhYyH7fCnrcVsBPN/k8YBM8DM8C274FRfK\nOkl9hDkoTXM9LhYVNtknm9EQZm8jTbN4y0yePPxziqtvlSE+iFwWzF4Jnt+mp/Zr\nOnIGbgizEWDw74k7BPkvuBgTZ2jqemsD17FVsstiZULIkcbn54QsfCGxKufP93Ri\n8jZEezJQqzAVYWeHI4eLe386drshUaQNqpE+YRUO8Eva/FtQVTjqGW/QWTmPyISJ\njydxzqZunl/Ti2akqM8SSw==\n-----END CERTIFICATE-----\n'
\set serial_a_go '0A6D8E2B5C3F4E1D7B9A0C2E4F6A8B1D3C5E7F90'
\set timestamp '1700000000'
\set nonce '5K8264ILTKCH16CQ2502SI8ZNMTM67VS'
\set body '{"id":"EV-2018022511223320873","create_time":"2023-11-15T06:13:20+08:00","resource_type":"encrypt-resource","event_type":"TRANSACTION.SUCCESS","summary":"支付成功","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM","ciphertext":"hmelYVFfx94TJO2+f5G9xIjCivRjWLY9rjYs5Etu574pUkBpabiTn8J0QdONh6qB2XKtGXqUR5apAEtsR2jzZrOmW5SEuznnzqTzm2Oy6/c5rJUScCDc6welXDZtsuWuTaw1h5Fsr/ygw3rjwDXL6V8A8Mfc9DTqlQQlh3sDgdKl2ZIIwdH1TEDMQb/x2za1OBpvkq4rlTzCAbpgeexHeUixavsPiGTlq2FWwkuvKS8ixK9WTILp7Mk+//2WwFmXxe+8e70n95Tu3pr3VH/tNRdmrjgOjsqEfsSqOkWAjj8ZjJ715pQewxmlKZfP8SU1WQGezEPvWVPKQMGQb9DBaCw5xZIH6VVi/iA7SZiCtv4c4JSnHKlDiaGN4MpVL7EWrnC1f3FAHcYN4BZWJnRQPUxnh2XrD8enM/biL+a/3u7cFZWiZIPiPl7YH7mNhYqSW8kj6Xz8LUhQRHoV0nXh6jWH3sGFhSSxQqS5VYqTmUGktUsmNEAcAKCyCZt71QfYtAE8VBaRL6ArKyAvU9decl2vJyOyX0Y2sVM41HZS3DBNTDo6SoNgyZ+H0L+kBg1mzLKoN5JrtL6nreEI","associated_data":"transaction","nonce":"fdasflkja484"}}'
\set sig_a 'NLVYM/RpRUzJwMWLo5349CmGyCyyiZUZAScCUxsOzVoG52kEx7qZZCzOS3pwpbMxXggCBkupjnnWc4Fqtbp/Ij1vx7uzn0exvFjM5KQDjerhcGmr8YWJ3RgfNOytc4/2AJqxlb9gTR2145+I5sGvAxwxN5D95tw7cWWnvNCxuOkW8XRFiPcdugeW3gikGSbIe1WDLbLzBUPyh+PuUhyVUziOlRn6JQ1PAnltW0CzRyFmQAx+ZAbeeJZ4xTp+Wf3bV7eWipROnXL+PLR8dQWfnQGYcSOZa9pabORs8sTX5HYBg6chq7mKOJ3zM6BotXuF0UbbwfbGKmsdB7vfnG88pA=='
\set paypal_root '-----BEGIN CERTIFICATE-----\nMIIDSDCCAjCgAwIBAgIBATANBgkqhkiG9w0BAQsFADA0MRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHjAcBgNVBAMMFWlkZW0gdGVzdCBQYXlQYWwgcm9vdDAgFw0yNDAxMDEw\nMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowNDESMBAGA1UECgwJaWRlbSB0ZXN0MR4w\nHAYDVQQDDBVpZGVtIHRlc3QgUGF5UGFsIHJvb3QwggEiMA0GCSqGSIb3DQEBAQUA\nA4IBDwAwggEKAoIBAQCqxxeRuvfJ66fY2PJ+aoQX2ZBF/2utryuNMlmwl6LachUw\nrc1gHD5V1TEVMYDogDsfsiaMi4nSksX2dBWkHhMySDJhNaDPLZ12fGyafW+DdV8C\nPeoNwgGVeUGC0RC2PS9DCKFlAy2BP4si53MoEw5Wmo3DE4veH9KEGsq7kYVNIg4J\nAvVg2Nle4okuJLddVhsnbiLzSSxVF8AQoiZzqkIFnRcY+H3pCb1T7JZ4hYr5u2T8\nDO6ZbYcjznEyVmcHKmQ2KuAxUXVqz3jthyUJtYWzGqS6j7DCtUYyGIcmOva1mmKD\n75TQTZ3s+o7lZcSNuoGK43nnV4j5345+J8Z5Jav3AgMBAAGjYzBhMA8GA1UdEwEB\n/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMB0GA1UdDgQWBBTpo1MUzn7AhamhTzfN\n9gCXLUZg9zAfBgNVHSMEGDAWgBTpo1MUzn7AhamhTzfN9gCXLUZg9zANBgkqhkiG\n9w0BAQsFAAOCAQEALgo6YgZg/I59qqHekuJ4QNECtM0fpNU6IDptgj8YFbYMhL1h\nP/rOfveB3v6utrjrJUtwfxC3LSpewIJ4GxG1HUaZeDlHmadrw3jT41Flp6ZIzOrQ\nzdk/EsXi5jli8FKEu6F9mMO+lCywcpTuBxQy7CDWKz1C9zsaaYZk647t5+zwmidE\nVSmgsg7FQYljqPQH7JE8+liMzhaQOQdrzkdftzhVgOJlKEaBpIcAdZA5o3AATIZn\nodb3Af/KXq5wGRHJRYzIfQHQZgjXZ9zct/b8nSLOzwuH0syb628h9Y34xUPG6r7/\n45aXNnCrqTwbs7Gr1rKTlfB15hY4DeDA7B7qvQ==\n-----END CERTIFICATE-----\n'
\set paypal_middle '-----BEGIN CERTIFICATE-----\nMIIDRjCCAi6gAwIBAgIBAjANBgkqhkiG9w0BAQsFADA0MRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHjAcBgNVBAMMFWlkZW0gdGVzdCBQYXlQYWwgcm9vdDAgFw0yNDAxMDEw\nMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowMjESMBAGA1UECgwJaWRlbSB0ZXN0MRww\nGgYDVQQDDBNpZGVtIHRlc3QgUGF5UGFsIENBMIIBIjANBgkqhkiG9w0BAQEFAAOC\nAQ8AMIIBCgKCAQEA3Be5wnSonshwP62CVZ6n8w5qe/daoKgguOrRCtGpdOFNp4zb\nHhxortbknX3bw1ZQLv9sfYztFPBz3BGTG61uQ0Wz2b0trzrckLTNaCLc9a/4ZF2+\neG0OjUi/ZnlpiMBg0wFCPO/8QPBxPuqak1Slj0XIsfr9ZYpVOLg34M51u7htIrpI\n/01T1C/puBhjDyP/6pS/bEf9NBM35J7zyZdZUYHXOihJ+i15SZj6+p7HNY2yReW9\ns2GS+i6zWcrG3AFSHQzCuLSK4N2gA+qQGGWo9QOo9Y10JHu4vu4qW5Mr5fz3Wc9c\nuEL2FuSXStmsxsrNYRxRSutoX9ChcgWKGb/brQIDAQABo2MwYTAPBgNVHRMBAf8E\nBTADAQH/MA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQUZOkvWWropxIAZX3dKCSP\nbYG/cxcwHwYDVR0jBBgwFoAU6aNTFM5+wIWpoU83zfYAly1GYPcwDQYJKoZIhvcN\nAQELBQADggEBAIry+XFKbEwl8m/ssj4HIUEizl9xWxe+V5h7XJvPqvFRwyE9RjjM\nCWE9jg0wuRamKQ+ZCE/pTfoXmW7qMx7GMPr7zBUn4/IIcuzzyFfDmLvPVphy6J1z\nHeMGSoiJNgajQX3WRMvDg+o42KzgoWt1cCTckL1j5BOywCeT3R3ltOvwXfSM+im0\nQHTiTbKQ0bJ9d5YwSpg3Y5x/K6TGWOjUQNA33eSWvaYQDXfU06wGt8uqgGco42zn\nnqe6plrOwKyLWhUpu7+yoM5iw2XrYYNIkArog35AWKa6mPXmdZg7Av49oPf1XNkT\nVj+gaTZyhYKvwnG4n+sABqcVqO4yDnYwJtc=\n-----END CERTIFICATE-----\n'
\set paypal_signer '-----BEGIN CERTIFICATE-----\nMIIDSzCCAjOgAwIBAgIBAzANBgkqhkiG9w0BAQsFADAyMRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHDAaBgNVBAMME2lkZW0gdGVzdCBQYXlQYWwgQ0EwIBcNMjQwMTAxMDAw\nMDAwWhgPMjEyNDAxMDEwMDAwMDBaMEIxEjAQBgNVBAoMCWlkZW0gdGVzdDEsMCoG\nA1UEAwwjbWVzc2FnZXZlcmlmaWNhdGlvbmNlcnRzLnBheXBhbC5jb20wggEiMA0G\nCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQCf8sjMCY/f4uv4mnim4xS9ljG7KiJ0\n1+C2YgtWJKcOJeknHmo+CZUZg234a26Qt7o0qulqhRbgyN6SvlJ4DmstPVewlb2o\neL/WqEPh8PjZfRYtCOv53aI3A1DmMLtpyo4SaXL5q1ntAZ0n0fM5wfkfTlw05sw9\nssEUhXbyDM7kk3020lWnmUKNh/IyZkFJk5nI5dipzXmMnrk9eXQx72mh5dyMrXPr\nbTYL+qLavORdszTO2YVjXDTNaU4149Gmwhnl/4OAVRhVo0NWa6oW88ASowV9/uHf\nQoKqzU8uC7IRCpADXo+cOwP1Bq3X+5ziHgVIM5wQ1LOQsQPfrNfDz72pAgMBAAGj\nWjBYMAkGA1UdEwQCMAAwCwYDVR0PBAQDAgbAMB0GA1UdDgQWBBSzt5slJFbLm0XN\nyJP26JSFE8+UizAfBgNVHSMEGDAWgBRk6S9ZauinEgBlfd0oJI9tgb9zFzANBgkq\nhkiG9w0BAQsFAAOCAQEAPQfY6gP7pqvT7pJj8GKJtGld9YtXH1tAY0NKLucz+4E8\n5oLIecAzgMagDbtthOMn6wvUKf6f4LtpjLV5VEJw+u2WOD7juoSUp3C4euZq/QJG\n+7N4sd20IZsph2XOvZIXiB7tIa/afb8exF3wdyS2TKPFghr+ARgJv7JIvzfcCBsW\nt2PA6JdZ3pkZalgD1SWLfnYkOUSSqkCGKiGe6zLtNfp+okHtYn5sozd8jnqR3AMV\n1uskHSt+U8ey+3jflX8day4smq41eTHFhNoQh8MlJDB092WE057qjlwqqA5PEHnJ\nuV2AaeZuchztArMyEVtTXKqADeUoC1yzeWoqF4DVYg==\n-----END CERTIFICATE-----\n'
\set paypal_webhook_id '8PT597110X687430LKGECATA'
\set paypal_body '{"id":"WH-58D329510W468432D-8HN650336L201105X","event_version":"1.0","create_time":"2025-01-15T10:30:00.511Z","resource_type":"capture","resource_version":"2.0","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"Payment completed for $ 88.88 USD","resource":{"id":"42311647XV020574X","amount":{"currency_code":"USD","value":"88.88"},"final_capture":true,"status":"COMPLETED","custom_id":"order-20250115-0003"}}'
\set paypal_tid '2f1e9a40-d31c-11ef-9cd2-0242ac120002'
\set paypal_time '2025-01-15T10:30:02Z'
\set paypal_sig 'Y5YrsoXO9qCcPI0LT1NzVVTcH+yhRum9LR/+Kef+cfBOo5qAj3M34kJh7aTEvQWPPCnhprGIVco5Kq6Ev8jz/YmLEGt9Z8bTU7kwSoYKm1Xkj4o2pIdthZ/vXnYGcSUEXk8ear0uX5i8T+p5nWGyW2Th/1PseEt6oa78CMiBkpyEYGLlxWBzMqhEC2GYU3hbfu+Nt9An48B1ldHYfQ3VrNCKuxhqmekt6ftOqrlnIaNCUxWc4DSgHxD9e/GiXOpvHmPNetvuo+1tN0pff8ghvbh1x2eOUxHu3tKPq1EteqkYgZtm08XH3g84Kf2GZIe4lqMEM6DZV8rD2QOPNVTqeA=='

-- Run a statement; show its SQLSTATE, message and detail instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text;
    d text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || m || coalesce(' / ' || nullif(d, ''), '');
END $$;

-- create, read back through the view (no secret there), replace
SELECT idem_webhook_source_set('stripe-live', 'stripe', ARRAY[:'stripe_secret']);
SELECT source, scheme, secret_count, tolerance, allowed_ips, ttl,
       updated_at > now() - interval '1 hour' AS updated_recently
FROM idem_webhook_sources ORDER BY source;
SELECT idem_webhook_source_set('stripe-live', 'stripe', ARRAY[:'stripe_secret', :'stripe_secret_b'],
                               tolerance => '10 minutes', allowed_ips => '{192.0.2.0/24, 2001:db8::/32}',
                               ttl => '30 days');
SELECT idem_webhook_source_set('std', 'standard', ARRAY[:'std_secret', :'std_pk']);
SELECT idem_webhook_source_set('', 'adyen', ARRAY[:'adyen_key'], tolerance => '0');
SELECT source, scheme, secret_count, tolerance, allowed_ips, ttl
FROM idem_webhook_sources ORDER BY source;
-- the view's columns are exactly these: no secret in any of them
SELECT attname FROM pg_attribute
WHERE attrelid = 'idem_webhook_sources'::regclass AND attnum > 0 ORDER BY attnum;
SELECT count(*) AS secrets_in_view
FROM idem_webhook_sources v
WHERE v::text LIKE '%' || :'stripe_secret' || '%' OR v::text LIKE '%' || :'std_pk' || '%';
-- the table holds them as given
SELECT source, secrets = ARRAY[:'stripe_secret', :'stripe_secret_b'] AS both_kept
FROM idem.webhook_sources WHERE source = 'stripe-live';

-- drop answers whether there was a source
SELECT idem_webhook_source_drop('std') AS dropped, idem_webhook_source_drop('std') AS again,
       idem_webhook_source_drop('never') AS never;
SELECT source FROM idem_webhook_sources ORDER BY source;
-- in a transaction that rolls back, set and drop leave nothing
BEGIN;
SELECT idem_webhook_source_set('rolled-back', 'github', ARRAY['s3cret']);
SELECT idem_webhook_source_drop('stripe-live');
SELECT source FROM idem_webhook_sources ORDER BY source;
ROLLBACK;
SELECT source FROM idem_webhook_sources ORDER BY source;

--
-- Bad arguments: each error, and nothing written
--
SELECT idem_webhook_source_set('stripe-live', 'stripe', ARRAY[:'stripe_secret']);
SELECT updated_at AS before FROM idem.webhook_sources WHERE source = 'stripe-live' \gset
-- NULLs: 22004
SELECT pg_temp.err($$SELECT idem_webhook_source_set(NULL, 'stripe', '{whsec_x}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', NULL, '{whsec_x}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', NULL)$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x, NULL}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}', NULL)$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}', allowed_ips => '{NULL}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_drop(NULL)$$);
-- 22023: unknown scheme, no secret, an empty one, a secret that cannot be
-- a key of the scheme (the message never quotes it), negative tolerance,
-- no allowed address, a ttl that is not positive
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'braintree', '{whsec_x}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{""}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'standard', '{whsec_topsecret!!}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'adyen', ARRAY['3F1A', 'not-hex-topsecret'])$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'alipay', '{topsecret}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'wechatpay', '{topsecret}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'unionpay', '{topsecret}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'paypal', '{topsecret}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'paypal', ARRAY['{"webhook_id": "W"}'])$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}', '-1 second')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}', allowed_ips => '{}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}', ttl => '0')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}', ttl => '-1 day')$$);
-- source names: as idem_webhook's (at most 255 bytes, the empty one allowed)
SELECT pg_temp.err(format($$SELECT idem_webhook_source_set(%L, 'stripe', '{whsec_x}')$$, repeat('s', 256)));
SELECT pg_temp.err(format($$SELECT idem_webhook_source_drop(%L)$$, repeat('s', 256)));
-- nothing was written: the source is as before, and no other appeared
SELECT source, scheme, secret_count, updated_at = :'before' AS unchanged
FROM idem_webhook_sources WHERE source = 'stripe-live';
SELECT count(*) AS sources FROM idem.webhook_sources;
-- nor does any message quote a secret
SELECT pg_temp.err($$SELECT idem_webhook_source_set('x', 'standard', '{whpk_dG9wc2VjcmV0}')$$)
       LIKE '%dG9wc2VjcmV0%' AS quoted;
-- read-only transactions are refused
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT idem_webhook_source_set('ro', 'github', '{s}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_source_drop('stripe-live')$$);
ROLLBACK;

-- the table must stay as the extension made it
ALTER TABLE idem.webhook_sources ALTER COLUMN scheme DROP NOT NULL;
SELECT pg_temp.err($$SELECT idem_webhook_source_set('stripe-live', 'stripe', '{whsec_x}')$$);
ALTER TABLE idem.webhook_sources ALTER COLUMN scheme SET NOT NULL;
SELECT pg_temp.err($$SELECT idem_webhook_source_drop('nothing')$$);

-- clean up
SELECT idem_webhook_source_drop(source) FROM idem_webhook_sources;

--
-- idem_webhook_receive: one verified delivery per scheme, its event id
-- where the scheme puts it; the vectors are old, so their sources take a
-- tolerance of a century
--
SELECT idem_webhook_source_set('r-stripe', 'stripe', ARRAY[:'stripe_secret'], '100 years');
SELECT idem_webhook_source_set('r-standard', 'standard', ARRAY[:'std_secret'], '100 years');
SELECT idem_webhook_source_set('r-svix', 'svix', ARRAY[:'std_secret'], '100 years');
SELECT idem_webhook_source_set('r-github', 'github', ARRAY[:'gh_secret']);
SELECT idem_webhook_source_set('r-shopify', 'shopify', ARRAY[:'shop_secret']);
SELECT idem_webhook_source_set('r-razorpay', 'razorpay', ARRAY[:'rzp_secret']);
SELECT idem_webhook_source_set('r-checkout', 'checkout', ARRAY[:'cko_secret']);
SELECT idem_webhook_source_set('r-paddle', 'paddle', ARRAY[:'pdl_secret'], '100 years');
SELECT idem_webhook_source_set('r-adyen', 'adyen', ARRAY[:'adyen_key']);
SELECT idem_webhook_source_set('r-adyen-platform', 'adyen_platform', ARRAY[:'adyen_key']);
SELECT idem_webhook_source_set('r-square', 'square', ARRAY[:'sq_secret']);
SELECT idem_webhook_source_set('r-paystack', 'paystack', ARRAY[:'psk_secret']);
SELECT idem_webhook_source_set('r-airwallex', 'airwallex', ARRAY[:'awx_secret'], '100 years');
SELECT idem_webhook_source_set('r-alipay', 'alipay', ARRAY[:'alipay_key']);
SELECT idem_webhook_source_set('r-unionpay', 'unionpay', ARRAY[:'unionpay_root' || :'unionpay_middle']);
SELECT idem_webhook_source_set('r-wechatpay', 'wechatpay', ARRAY[:'cert_a'], '100 years');
SELECT idem_webhook_source_set('r-mercadopago', 'mercadopago', ARRAY[:'mp_secret'], '100 years');
SELECT idem_webhook_source_set('r-paypal', 'paypal',
    ARRAY[jsonb_build_object('webhook_id', :'paypal_webhook_id', 'roots', :'paypal_root',
                             'subject', 'messageverificationcerts.paypal.com')::text], '100 years');
CREATE TEMP TABLE deliveries AS
SELECT * FROM (VALUES
  ('r-stripe', :'stripe_payload',
   jsonb_build_object('Stripe-Signature', 't=' || :'stripe_t' || ',v1=' || :'stripe_sig')),
  ('r-standard', :'std_payload',
   jsonb_build_object('webhook-id', :'std_id', 'webhook-timestamp', :'std_ts',
                      'webhook-signature', 'v1,' || :'std_sig')),
  ('r-svix', :'std_payload',
   jsonb_build_object('svix-id', :'std_id', 'svix-timestamp', :'std_ts',
                      'svix-signature', 'v1,' || :'std_sig')),
  ('r-github', :'gh_payload',
   jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig',
                      'X-GitHub-Delivery', '72d3162e-cc78-11e3-81ab-4c9367dc0958')),
  ('r-shopify', :'shop_payload',
   jsonb_build_object('X-Shopify-Hmac-Sha256', :'shop_sig',
                      'X-Shopify-Webhook-Id', 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043')),
  ('r-razorpay', :'rzp_payload',
   jsonb_build_object('X-Razorpay-Signature', :'rzp_sig', 'X-Razorpay-Event-Id', 'KXrhRlGwC2Pv2B')),
  ('r-checkout', :'cko_payload', jsonb_build_object('Cko-Signature', :'cko_sig')),
  ('r-paddle', :'pdl_payload',
   jsonb_build_object('Paddle-Signature', 'ts=' || :'pdl_ts' || ';h1=' || :'pdl_sig')),
  ('r-adyen', jsonb_build_object(
    'additionalData', jsonb_build_object('hmacSignature', :'adyen_sig'),
    'amount', jsonb_build_object('currency', :'adyen_currency', 'value', (:'adyen_value')::int),
    'eventCode', :'adyen_event', 'merchantAccountCode', :'adyen_merchant',
    'merchantReference', :'adyen_ref', 'originalReference', :'adyen_orig',
    'pspReference', :'adyen_psp', 'success', :'adyen_success')::text, '{}'::jsonb),
  ('r-adyen-platform', :'adyp_payload', jsonb_build_object('HmacSignature', :'adyp_sig')),
  ('r-square', :'sq_body', jsonb_build_object('x-square-hmacsha256-signature', :'sq_sig')),
  ('r-paystack', :'psk_payload', jsonb_build_object('x-paystack-signature', :'psk_sig')),
  ('r-airwallex', :'awx_payload', jsonb_build_object('x-timestamp', :'awx_ts', 'x-signature', :'awx_sig')),
  ('r-alipay', :'alipay_form', '{}'),
  ('r-unionpay', :'unionpay_form', '{}'),
  ('r-wechatpay', :'body',
   jsonb_build_object('Wechatpay-Serial', :'serial_a_go', 'Wechatpay-Signature', :'sig_a',
                      'Wechatpay-Timestamp', :'timestamp', 'Wechatpay-Nonce', :'nonce')),
  ('r-paypal', :'paypal_body',
   jsonb_build_object('PAYPAL-TRANSMISSION-ID', :'paypal_tid', 'PAYPAL-TRANSMISSION-TIME', :'paypal_time',
                      'PAYPAL-TRANSMISSION-SIG', :'paypal_sig', 'PAYPAL-AUTH-ALGO', 'SHA256withRSA',
                      'PAYPAL-CERT-PEM', :'paypal_signer' || :'paypal_middle')),
  -- the body's id, a number here, is the event id
  ('r-mercadopago', :'mp_payload',
   jsonb_build_object('x-signature', 'ts=' || :'mp_ts' || ',v1=' || :'mp_sig', 'x-request-id', :'mp_request_id'))
) AS d(source, payload, headers);
-- each is new, then a duplicate, with the event id of its scheme
SELECT d.source, r.* FROM deliveries d, idem_webhook_receive(d.source, d.payload, d.headers) r
ORDER BY d.source;
SELECT d.source, r.* FROM deliveries d, idem_webhook_receive(d.source, d.payload, d.headers) r
ORDER BY d.source;
-- recorded as idem_webhook records them: in idem.webhooks, and a duplicate for it
SELECT w.source, w.event_id, w.expires_at - w.received_at AS kept
FROM idem.webhooks w JOIN deliveries d USING (source) ORDER BY 1;
SELECT idem_webhook('r-github', '72d3162e-cc78-11e3-81ab-4c9367dc0958') AS github_first;
-- Adyen's platform webhooks and Paystack name no event id: the body's
-- SHA-256 is recorded
SELECT w.source, w.event_id = encode(sha256(convert_to(d.payload, 'UTF8')), 'hex') AS body_digest
FROM idem.webhooks w JOIN deliveries d USING (source)
WHERE w.source IN ('r-adyen-platform', 'r-paystack') ORDER BY 1;
-- the event id the scheme names is the one recorded: a delivery of another
-- id, signed alike, is new (GitHub signs the body, not the delivery id)
SELECT * FROM idem_webhook_receive('r-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', 'other-id'));

--
-- The reasons of a rejection, each with nothing written and counted
--
SELECT count(*) AS webhooks, (SELECT last_value FROM idem.token_seq) AS seq,
       (SELECT webhooks_rejected FROM idem_stats WHERE datname = current_database()) AS rejected
FROM idem.webhooks \gset before_
\set gh_headers '{"X-Hub-Signature-256": "sha256=' :gh_sig '", "X-GitHub-Delivery": "gh-rejected-1"}'
-- unknown_source: no such source (and the secrets of others are no help)
SELECT * FROM idem_webhook_receive('r-nobody', :'gh_payload', :'gh_headers');
-- ip: the source lists addresses and the client is not in them (v4 and v6)
SELECT idem_webhook_source_set('r-github-ip', 'github', ARRAY[:'gh_secret'],
                               allowed_ips => '{192.0.2.0/24, 2001:db8::/32}');
SELECT * FROM idem_webhook_receive('r-github-ip', :'gh_payload', :'gh_headers', '198.51.100.7');
SELECT * FROM idem_webhook_receive('r-github-ip', :'gh_payload', :'gh_headers', '2001:db9::1');
-- the IP check comes before the signature: a forged request from outside is "ip"
SELECT * FROM idem_webhook_receive('r-github-ip', 'forged', :'gh_headers', '198.51.100.7');
-- signature: bad, missing, or another secret's
SELECT * FROM idem_webhook_receive('r-github', :'gh_payload' || ' ', :'gh_headers');
SELECT * FROM idem_webhook_receive('r-github', :'gh_payload', '{"X-GitHub-Delivery": "gh-rejected-1"}');
SELECT idem_webhook_source_set('r-github-b', 'github', ARRAY[:'gh_secret_b']);
SELECT * FROM idem_webhook_receive('r-github-b', :'gh_payload', :'gh_headers');
-- timestamp: the signature is genuine but signed outside the tolerance
-- (the vectors are years old); with a forged signature it is "signature"
SELECT idem_webhook_source_set('r-stripe-5min', 'stripe', ARRAY[:'stripe_secret']);
SELECT * FROM idem_webhook_receive('r-stripe-5min', :'stripe_payload',
    jsonb_build_object('Stripe-Signature', 't=' || :'stripe_t' || ',v1=' || :'stripe_sig'));
SELECT * FROM idem_webhook_receive('r-stripe-5min', :'stripe_payload',
    jsonb_build_object('Stripe-Signature', 't=' || :'stripe_t' || ',v1=' || repeat('0', 64)));
SELECT idem_webhook_source_set('r-standard-5min', 'standard', ARRAY[:'std_secret']);
SELECT * FROM idem_webhook_receive('r-standard-5min', :'std_payload',
    jsonb_build_object('webhook-id', :'std_id', 'webhook-timestamp', :'std_ts',
                       'webhook-signature', 'v1,' || :'std_sig'));
SELECT idem_webhook_source_set('r-wechatpay-5min', 'wechatpay', ARRAY[:'cert_a']);
SELECT * FROM idem_webhook_receive('r-wechatpay-5min', :'body',
    jsonb_build_object('Wechatpay-Serial', :'serial_a_go', 'Wechatpay-Signature', :'sig_a',
                       'Wechatpay-Timestamp', :'timestamp', 'Wechatpay-Nonce', :'nonce'));
SELECT idem_webhook_source_set('r-paypal-5min', 'paypal',
    ARRAY[jsonb_build_object('webhook_id', :'paypal_webhook_id', 'roots', :'paypal_root',
                             'subject', 'messageverificationcerts.paypal.com')::text]);
SELECT * FROM idem_webhook_receive('r-paypal-5min', :'paypal_body',
    jsonb_build_object('PAYPAL-TRANSMISSION-ID', :'paypal_tid', 'PAYPAL-TRANSMISSION-TIME', :'paypal_time',
                       'PAYPAL-TRANSMISSION-SIG', :'paypal_sig', 'PAYPAL-AUTH-ALGO', 'SHA256withRSA',
                       'PAYPAL-CERT-PEM', :'paypal_signer' || :'paypal_middle'));
-- Mercado Pago: stale is "timestamp"; a body whose data.id is not the
-- signed one, or a delivery without x-signature (a legacy IPN), "signature"
SELECT idem_webhook_source_set('r-mercadopago-5min', 'mercadopago', ARRAY[:'mp_secret']);
SELECT * FROM idem_webhook_receive('r-mercadopago-5min', :'mp_payload',
    jsonb_build_object('x-signature', 'ts=' || :'mp_ts' || ',v1=' || :'mp_sig', 'x-request-id', :'mp_request_id'));
SELECT * FROM idem_webhook_receive('r-mercadopago', replace(:'mp_payload', '123456789', '123456780'),
    jsonb_build_object('x-signature', 'ts=' || :'mp_ts' || ',v1=' || :'mp_sig', 'x-request-id', :'mp_request_id'));
SELECT * FROM idem_webhook_receive('r-mercadopago', '{"resource":"123456789","topic":"payment"}', '{}');
-- malformed: verified, but no event id where the scheme puts it (GitHub:
-- no header, an empty one, one too long for an event id)
SELECT * FROM idem_webhook_receive('r-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig'));
SELECT * FROM idem_webhook_receive('r-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', ''));
SELECT * FROM idem_webhook_receive('r-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', repeat('x', 256)));
-- nothing was written by any rejection, and each was counted
SELECT count(*) - :before_webhooks AS webhooks_written,
       (SELECT last_value FROM idem.token_seq) - :before_seq AS tokens_taken,
       (SELECT webhooks_rejected FROM idem_stats WHERE datname = current_database())
         - :before_rejected AS rejected_counted
FROM idem.webhooks;

-- The body's id (checkout, stripe, wechatpay; paddle's event_id): signed
-- here with pgcrypto, it must be a string member of the root object, once
-- (pgcrypto may be there already from another test: install it quietly,
-- and at the end remove it only if this test installed it)
SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pgcrypto') AS drop_pgcrypto \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
RESET client_min_messages;
SELECT idem_webhook_source_set('r-cko', 'checkout', '{cko-test-secret}');
SELECT label, r.status, r.event_id, r.reason
FROM (VALUES ('not JSON', 'Hello'),
             ('no id', '{"type": "payment_captured"}'),
             ('a number', '{"id": 42}'),
             ('null', '{"id": null}'),
             ('an object', '{"id": {"v": "evt_1"}}'),
             ('twice', '{"id": "evt_1", "id": "evt_2"}'),
             ('only nested', '{"data": {"id": "evt_1"}}'),
             ('an array', '[{"id": "evt_1"}]'),
             ('empty', '{"id": ""}'),
             ('a NUL escape', '{"id": "evt\u0000"}'),
             ('a NUL elsewhere', '{"note": "a\u0000b", "id": "evt_7", "n\u0000": [0]}'),
             ('cut short', '{"id": "evt_1"'),
             ('escaped', '{"data": {"id": 1}, "id": "evt_\u00e9\"x"}'),
             ('spaced', E' \t{ "id" :\n"evt_2" }\r\n'),
             ('among all kinds', '{"a": [-0.5e+3, 0, 1E9, true, false, null, {}, []], "id": "evt_3", "b": {"id": 7}}'),
             ('a trailing comma', '{"id": "evt_4",}'),
             ('a leading zero', '{"n": 01, "id": "evt_5"}'),
             ('text after the root', '{"id": "evt_6"} x'),
             ('a bare name', '{id: "evt_7"}'),
             ('a tab in a string', E'{"id": "evt\t8"}'),
             ('an escaped name', '{"\u0069d": "evt_9"}')) AS v(label, body),
     idem_webhook_receive('r-cko', body,
         jsonb_build_object('Cko-Signature', encode(hmac(body, 'cko-test-secret', 'sha256'), 'hex'))) r;
-- Stripe within the tolerance, against the clock: new; ten minutes old: timestamp
CREATE FUNCTION pg_temp.stripe_now(payload text, offset_s int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('Stripe-Signature', 't=' || t || ',v1=' ||
         encode(hmac(t || '.' || payload, 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', 'sha256'), 'hex'))
  FROM (SELECT (floor(extract(epoch FROM clock_timestamp())) + offset_s)::bigint::text AS t) AS n
$$;
SELECT * FROM idem_webhook_receive('r-stripe-5min', '{"id": "evt_now"}',
    pg_temp.stripe_now('{"id": "evt_now"}', -5));
SELECT * FROM idem_webhook_receive('r-stripe-5min', '{"id": "evt_old"}',
    pg_temp.stripe_now('{"id": "evt_old"}', -600));
\if :drop_pgcrypto
DROP EXTENSION pgcrypto;
\endif

-- NULLs: the source and payload and headers must be given (22004)
SELECT pg_temp.err($$SELECT idem_webhook_receive(NULL, 'p', '{}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_receive('r-github', NULL, '{}')$$);
SELECT pg_temp.err($$SELECT idem_webhook_receive('r-github', 'p', NULL)$$);
-- A source that lists addresses fails closed: a genuine delivery whose
-- address is unknown (NULL) or a network rather than one host is "ip";
-- an IPv4-mapped IPv6 address counts as its IPv4 form.  An allowed host
-- goes on to the signature.
SELECT label, r.status, r.event_id, r.reason
FROM (VALUES ('unknown', NULL::inet, 'gh-ip-1'),
             ('a v4 network', '192.0.2.0/24', 'gh-ip-2'),
             ('a v4 host with its mask', '192.0.2.10/24', 'gh-ip-3'),
             ('a v6 network', '2001:db8::/64', 'gh-ip-4'),
             ('v4-mapped, outside', '::ffff:198.51.100.7', 'gh-ip-5'),
             ('v4-mapped network', '::ffff:192.0.2.0/120', 'gh-ip-6'),
             ('v4-compatible, not mapped', '::192.0.2.10', 'gh-ip-7'),
             ('v6', '2001:db8::17', 'gh-ip-10'),
             ('v4', '192.0.2.10', 'gh-ip-11'),
             ('v4 /32', '192.0.2.11/32', 'gh-ip-12'),
             ('v4-mapped', '::ffff:192.0.2.10', 'gh-ip-13'),
             ('v4-mapped, upper case', '::FFFF:C000:020A', 'gh-ip-14')) AS c(label, ip, id),
     idem_webhook_receive('r-github-ip', :'gh_payload',
         jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', c.id),
         c.ip) AS r;
-- only the allowed hosts' deliveries were recorded
SELECT string_agg(event_id, ' ' ORDER BY event_id) AS recorded
FROM idem.webhooks WHERE source = 'r-github-ip' AND event_id LIKE 'gh-ip-%';
-- a source without allowed_ips takes any address, NULL and networks included
SELECT label, r.status, r.reason
FROM (VALUES ('unknown', NULL::inet, 'gh-any-1'),
             ('a network', '10.0.0.0/8', 'gh-any-2'),
             ('v4-mapped', '::ffff:203.0.113.7', 'gh-any-3')) AS c(label, ip, id),
     idem_webhook_receive('r-github', :'gh_payload',
         jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', c.id),
         c.ip) AS r;

-- rotation: with two secrets both verify; replacing the list takes effect
-- at the next call
SELECT idem_webhook_source_set('r-rot', 'github', ARRAY[:'gh_secret', :'gh_secret_b']);
SELECT status FROM idem_webhook_receive('r-rot', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', 'rot-1'));
SELECT status FROM idem_webhook_receive('r-rot', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig_b', 'X-GitHub-Delivery', 'rot-2'));
SELECT idem_webhook_source_set('r-rot', 'github', ARRAY[:'gh_secret_b']);
SELECT status, reason FROM idem_webhook_receive('r-rot', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', 'rot-3'));
-- a dropped source is unknown at once
SELECT idem_webhook_source_drop('r-rot');
SELECT status, reason FROM idem_webhook_receive('r-rot', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig_b', 'X-GitHub-Delivery', 'rot-4'));
-- the ttl of the source is the record's
SELECT idem_webhook_source_set('r-ttl', 'github', ARRAY[:'gh_secret'], ttl => '2 hours');
SELECT status FROM idem_webhook_receive('r-ttl', :'gh_payload', :'gh_headers');
SELECT expires_at - received_at AS kept FROM idem.webhooks WHERE source = 'r-ttl';
-- in a transaction that rolls back, the record goes too
BEGIN;
SELECT status FROM idem_webhook_receive('r-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', 'rolled-back'));
ROLLBACK;
SELECT status FROM idem_webhook_receive('r-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', 'rolled-back'));
-- the select-list form of doc/webhooks.md: new, then duplicate, one record
SELECT (r).status, (r).event_id, (r).reason
FROM (SELECT idem_webhook_receive('r-github', :'gh_payload',
          jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig',
                             'X-GitHub-Delivery', 'form-list')) AS r OFFSET 0) s;
SELECT (r).status, (r).event_id, (r).reason
FROM (SELECT idem_webhook_receive('r-github', :'gh_payload',
          jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig',
                             'X-GitHub-Delivery', 'form-list')) AS r OFFSET 0) s;
SELECT event_id, count(*) FROM idem.webhooks
WHERE source = 'r-github' AND event_id = 'form-list' GROUP BY 1;
-- kept whole by OFFSET 0, it runs once for its three columns (each call of
-- a forged delivery is counted); (f(...)).* runs it once per column, as
-- doc/webhooks.md warns
SELECT webhooks_rejected AS rejected_before FROM idem_stats WHERE datname = current_database() \gset
SELECT (r).status, (r).event_id, (r).reason
FROM (SELECT idem_webhook_receive('r-github', 'forged', '{}') AS r OFFSET 0) s;
SELECT webhooks_rejected - :rejected_before AS calls FROM idem_stats WHERE datname = current_database();
SELECT webhooks_rejected AS rejected_before FROM idem_stats WHERE datname = current_database() \gset
SELECT (idem_webhook_receive('r-github', 'forged', '{}')).*;
SELECT webhooks_rejected - :rejected_before AS calls FROM idem_stats WHERE datname = current_database();
-- read-only transactions are refused
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT idem_webhook_receive('r-github', 'p', '{}')$$);
ROLLBACK;
-- secrets from a table, where the array is toasted, and from a PL/pgSQL
-- variable, where it is an expanded array: stored flat, read back whole
CREATE TEMP TABLE big_secrets AS
SELECT array_agg(repeat(md5(i::text), 100) ORDER BY i) || ARRAY[:'gh_secret'] AS s
FROM generate_series(1, 50) i;
SELECT pg_column_size(s) > 2000 AS large FROM big_secrets;
SELECT idem_webhook_source_set('r-big', 'github', s) FROM big_secrets;
DO $$
DECLARE
    a text[] := ARRAY['first'];
BEGIN
    a[2] := 'It''s a Secret to Everybody';
    PERFORM idem_webhook_source_set('r-expanded', 'github', a);
END $$;
SELECT source, secret_count FROM idem_webhook_sources
WHERE source IN ('r-big', 'r-expanded') ORDER BY 1;
SELECT w.source, (idem_webhook_receive(w.source, :'gh_payload', :'gh_headers')).status
FROM (VALUES ('r-big'), ('r-expanded')) AS w(source) ORDER BY 1;

-- clean up
SELECT count(*) AS dropped FROM idem_webhook_sources WHERE idem_webhook_source_drop(source);
DELETE FROM idem.webhooks WHERE source LIKE 'r-%';
