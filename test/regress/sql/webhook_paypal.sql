SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
-- idem_webhook_verify: PayPal's webhooks ("paypal").  First a delivery of
-- PayPal's own, from the tests of its Java SDK (paypal/PayPal-Java-SDK,
-- rest-api-sdk/src/test: ValidateCertTest.java, whose headers, body and
-- webhook id these are, and testClientCert.crt, the sandbox certificate
-- PAYPAL-CERT-URL served); the DigiCert root and intermediate it chains to
-- are those PayPal's Python SDK ships (paypal/PayPal-Python-SDK,
-- paypalrestsdk/data).  The certificate was valid from 2017-02-18 to
-- 2019-04-26: checked at its transmission time, it verifies.
\set paypal_sdk_root '-----BEGIN CERTIFICATE-----\nMIIDxTCCAq2gAwIBAgIQAqxcJmoLQJuPC3nyrkYldzANBgkqhkiG9w0BAQUFADBs\nMQswCQYDVQQGEwJVUzEVMBMGA1UEChMMRGlnaUNlcnQgSW5jMRkwFwYDVQQLExB3\nd3cuZGlnaWNlcnQuY29tMSswKQYDVQQDEyJEaWdpQ2VydCBIaWdoIEFzc3VyYW5j\nZSBFViBSb290IENBMB4XDTA2MTExMDAwMDAwMFoXDTMxMTExMDAwMDAwMFowbDEL\nMAkGA1UEBhMCVVMxFTATBgNVBAoTDERpZ2lDZXJ0IEluYzEZMBcGA1UECxMQd3d3\nLmRpZ2ljZXJ0LmNvbTErMCkGA1UEAxMiRGlnaUNlcnQgSGlnaCBBc3N1cmFuY2Ug\nRVYgUm9vdCBDQTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoCggEBAMbM5XPm\n+9S75S0tMqbf5YE/yc0lSbZxKsPVlDRnogocsF9ppkCxxLeyj9CYpKlBWTrT3JTW\nPNt0OKRKzE0lgvdKpVMSOO7zSW1xkX5jtqumX8OkhPhPYlG++MXs2ziS4wblCJEM\nxChBVfvLWokVfnHoNb9Ncgk9vjo4UFt3MRuNs8ckRZqnrG0AFFoEt7oT61EKmEFB\nIk5lYYeBQVCmeVyJ3hlKV9Uu5l0cUyx+mM0aBhakaHPQNAQTXKFx01p8VdteZOE3\nhzBWBOURtCmAEvF5OYiiAhF8J2a3iLd48soKqDirCmTCv2ZdlYTBoSUeh10aUAsg\nEsxBu24LUTi4S8sCAwEAAaNjMGEwDgYDVR0PAQH/BAQDAgGGMA8GA1UdEwEB/wQF\nMAMBAf8wHQYDVR0OBBYEFLE+w2kD+L9HAdSYJhoIAu9jZCvDMB8GA1UdIwQYMBaA\nFLE+w2kD+L9HAdSYJhoIAu9jZCvDMA0GCSqGSIb3DQEBBQUAA4IBAQAcGgaX3Nec\nnzyIZgYIVyHbIUf4KmeqvxgydkAQV8GK83rZEWWONfqe/EW1ntlMMUu4kehDLI6z\neM7b41N5cdblIZQB2lWHmiRk9opmzN6cN82oNLFpmyPInngiK3BD41VHMWEZ71jF\nhS9OMPagMRYjyOfiZRYzy78aG6A9+MpeizGLYAiJLQwGXFK3xPkKmNEVX58Svnw2\nYzi9RKR/5CYrCsSXaQ3pjOLAEFe4yHYSkVXySGnYvCoCWw9E1CAx2/S6cCZdkGCe\nvEsXCS+0yx5DaMkHJ8HSXPfqIbloEpw8nL+e/IBcm2PN7EeqJSdnoDfzAIJ9VNep\n+OkuE6N36B9K\n-----END CERTIFICATE-----\n'
\set paypal_sdk_middle '-----BEGIN CERTIFICATE-----\nMIIEtjCCA56gAwIBAgIQDHmpRLCMEZUgkmFf4msdgzANBgkqhkiG9w0BAQsFADBs\nMQswCQYDVQQGEwJVUzEVMBMGA1UEChMMRGlnaUNlcnQgSW5jMRkwFwYDVQQLExB3\nd3cuZGlnaWNlcnQuY29tMSswKQYDVQQDEyJEaWdpQ2VydCBIaWdoIEFzc3VyYW5j\nZSBFViBSb290IENBMB4XDTEzMTAyMjEyMDAwMFoXDTI4MTAyMjEyMDAwMFowdTEL\nMAkGA1UEBhMCVVMxFTATBgNVBAoTDERpZ2lDZXJ0IEluYzEZMBcGA1UECxMQd3d3\nLmRpZ2ljZXJ0LmNvbTE0MDIGA1UEAxMrRGlnaUNlcnQgU0hBMiBFeHRlbmRlZCBW\nYWxpZGF0aW9uIFNlcnZlciBDQTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoC\nggEBANdTpARR+JmmFkhLZyeqk0nQOe0MsLAAh/FnKIaFjI5j2ryxQDji0/XspQUY\nuD0+xZkXMuwYjPrxDKZkIYXLBxA0sFKIKx9om9KxjxKws9LniB8f7zh3VFNfgHk/\nLhqqqB5LKw2rt2O5Nbd9FLxZS99RStKh4gzikIKHaq7q12TWmFXo/a8aUGxUvBHy\n/Urynbt/DvTVvo4WiRJV2MBxNO723C3sxIclho3YIeSwTQyJ3DkmF93215SF2AQh\ncJ1vb/9cuhnhRctWVyh+HA1BV6q3uCe7seT6Ku8hI3UarS2bhjWMnHe1c63YlC3k\n8wyd7sFOYn4XwHGeLN7x+RAoGTMCAwEAAaOCAUkwggFFMBIGA1UdEwEB/wQIMAYB\nAf8CAQAwDgYDVR0PAQH/BAQDAgGGMB0GA1UdJQQWMBQGCCsGAQUFBwMBBggrBgEF\nBQcDAjA0BggrBgEFBQcBAQQoMCYwJAYIKwYBBQUHMAGGGGh0dHA6Ly9vY3NwLmRp\nZ2ljZXJ0LmNvbTBLBgNVHR8ERDBCMECgPqA8hjpodHRwOi8vY3JsNC5kaWdpY2Vy\ndC5jb20vRGlnaUNlcnRIaWdoQXNzdXJhbmNlRVZSb290Q0EuY3JsMD0GA1UdIAQ2\nMDQwMgYEVR0gADAqMCgGCCsGAQUFBwIBFhxodHRwczovL3d3dy5kaWdpY2VydC5j\nb20vQ1BTMB0GA1UdDgQWBBQ901Cl1qCt7vNKYApl0yHU+PjWDzAfBgNVHSMEGDAW\ngBSxPsNpA/i/RwHUmCYaCALvY2QrwzANBgkqhkiG9w0BAQsFAAOCAQEAnbbQkIbh\nhgLtxaDwNBx0wY12zIYKqPBKikLWP8ipTa18CK3mtlC4ohpNiAexKSHc59rGPCHg\n4xFJcKx6HQGkyhE6V6t9VypAdP3THYUYUN9XR3WhfVUgLkc3UHKMf4Ib0mKPLQNa\n2sPIoc4sUqIAY+tzunHISScjl2SFnjgOrWNoPLpSgVh5oywM395t6zHyuqB8bPEs\n1OG9d4Q3A84ytciagRpKkk47RpqF/oOi+Z6Mo8wNXrM9zwR4jxQUezKcxwCmXMS1\noVWNWlZopCJwqjyBcdmdqEU79OX2olHdx3ti6G8MdOu42vi/hw15UJGQmxg7kVkn\n8TUoE6smftX3eg==\n-----END CERTIFICATE-----\n'
\set paypal_sdk_signer '-----BEGIN CERTIFICATE-----\nMIIILDCCBxSgAwIBAgIQDEd6EXcAnHmtnx4u7tJZlTANBgkqhkiG9w0BAQsFADB1\nMQswCQYDVQQGEwJVUzEVMBMGA1UEChMMRGlnaUNlcnQgSW5jMRkwFwYDVQQLExB3\nd3cuZGlnaWNlcnQuY29tMTQwMgYDVQQDEytEaWdpQ2VydCBTSEEyIEV4dGVuZGVk\nIFZhbGlkYXRpb24gU2VydmVyIENBMB4XDTE3MDIxODAwMDAwMFoXDTE5MDQyNjEy\nMDAwMFowggElMR0wGwYDVQQPDBRQcml2YXRlIE9yZ2FuaXphdGlvbjETMBEGCysG\nAQQBgjc8AgEDEwJVUzEZMBcGCysGAQQBgjc8AgECEwhEZWxhd2FyZTEQMA4GA1UE\nBRMHMzAxNDI2NzEWMBQGA1UECRMNMjIxMSBOIDFzdCBTdDEOMAwGA1UEERMFOTUx\nMzExCzAJBgNVBAYTAlVTMRMwEQYDVQQIEwpDYWxpZm9ybmlhMREwDwYDVQQHEwhT\nYW4gSm9zZTEVMBMGA1UEChMMUGF5UGFsLCBJbmMuMRgwFgYDVQQLEw9QYXJ0bmVy\nIFN1cHBvcnQxNDAyBgNVBAMTK21lc3NhZ2V2ZXJpZmljYXRpb25jZXJ0cy5zYW5k\nYm94LnBheXBhbC5jb20wggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQDT\nAsLQcHFGG0mvLNAlu3FJ/6QUr1EbUSBYnqF/oRbirzJRWbT3JWpFr2palaFNnfpC\nwLB/KY+UX3xDLB5Ic38piG6FzRe1TiZcxhdIbOY21OvVVFatXfM62lzwX3RASpbV\nA1cbCoDBSbgyplSPINVd8Gyf+qtJxbW7M6cVuZae1Nx0mA63SfNnRpBwOvYAUkCr\nuCCjIVLqRuWbRzn0wvayVMWasw047rHhtFmaYBwJ1L4sn5NL+HDQ5wSMb1EE46v/\naGGdv7bcHhc4Re0C1pFW032MVb85eRD7OtvD2hZM2O5JwiwHMBXzxEjrIbGCA6be\n3acmzYKxYLZHYt6KlQDBAgMBAAGjggQEMIIEADAfBgNVHSMEGDAWgBQ901Cl1qCt\n7vNKYApl0yHU+PjWDzAdBgNVHQ4EFgQUgPw27mYvKgltHUaTXExjogwMhv8wNgYD\nVR0RBC8wLYIrbWVzc2FnZXZlcmlmaWNhdGlvbmNlcnRzLnNhbmRib3gucGF5cGFs\nLmNvbTAOBgNVHQ8BAf8EBAMCBaAwHQYDVR0lBBYwFAYIKwYBBQUHAwEGCCsGAQUF\nBwMCMHUGA1UdHwRuMGwwNKAyoDCGLmh0dHA6Ly9jcmwzLmRpZ2ljZXJ0LmNvbS9z\naGEyLWV2LXNlcnZlci1nMS5jcmwwNKAyoDCGLmh0dHA6Ly9jcmw0LmRpZ2ljZXJ0\nLmNvbS9zaGEyLWV2LXNlcnZlci1nMS5jcmwwSwYDVR0gBEQwQjA3BglghkgBhv1s\nAgEwKjAoBggrBgEFBQcCARYcaHR0cHM6Ly93d3cuZGlnaWNlcnQuY29tL0NQUzAH\nBgVngQwBATCBiAYIKwYBBQUHAQEEfDB6MCQGCCsGAQUFBzABhhhodHRwOi8vb2Nz\ncC5kaWdpY2VydC5jb20wUgYIKwYBBQUHMAKGRmh0dHA6Ly9jYWNlcnRzLmRpZ2lj\nZXJ0LmNvbS9EaWdpQ2VydFNIQTJFeHRlbmRlZFZhbGlkYXRpb25TZXJ2ZXJDQS5j\ncnQwDAYDVR0TAQH/BAIwADCCAfgGCisGAQQB1nkCBAIEggHoBIIB5AHiAHYApLkJ\nkLQYWBSHuxOizGdwCjw1mAT5G9+443fNDsgN3BAAAAFaTqxLiAAABAMARzBFAiEA\npDFqvEjdtugwxjKvZqJ1Y1A1F1UX9EIvZL5Ar02YSe4CIBEf0EzZiic7u3IzI8BU\ny0oFKh11VL1YIBAZfIj744o/AHYAVhQGmi/XwuzT9eG9RLI+x0Z2ubyZEVzA75SY\nVdaJ0N0AAAFaTqxM2wAABAMARzBFAiEAn3lwWc95wltvaOnBaM09VQN9xhHHkwec\nw5+tdHhSimgCIC1BaJ0RodgykU0ii2QzuzEoR8ci6qF+Pj6j1GE5wvU4AHcA7ku9\nt3XOYLrhQmkfq+GeZqMPfl+wctiDAMR7iXqo/csAAAFaTqxOhwAABAMASDBGAiEA\n/+kyQku3N/kwrubEfHSM4h20mZTvrAoRZovA5qwpVLICIQDyOQQu9r6kets5tO0b\nYDXmaVWypOdS/ocseU11p5vBYAB3ALvZ37wfinG1k5Qjl6qSe0c4V5UKq1LoGpCW\nZDaOHtGFAAABWk6sTEUAAAQDAEgwRgIhALIDDduHsT0LymHxdrOWzzEaDLhVSl5i\nvHAgWBcdl5AAAiEAgIYoXQHtSAiPyH4METNmAZAhiwo9uwTavdrjLsFJ2nowDQYJ\nKoZIhvcNAQELBQADggEBAMxgCr0MTAbu7aE8ryfK3q8grN4rJOzBBzh8tSKYW4PU\nFhAc6ZaW2/PNV+H8oYOP3nB28neglNjR/XZCyd7IRJoxSfwzUZhOBAzTFP0sp5Cu\nGZN24j2SrxcKCaq3mszLmwgiRzuDUnRFdI2OHep6EcDelfURGz8w6eTaLw7m3FZr\ngJSmmAOntirVZeVPLou74ykxWUm0kEi/OxNQWlgAlAHUcGZHpcupddK/dNRmCFSw\nRBeiGwaLsz2SXYNvTs4it8cisAxTwBD1iqyXEKRSx6HpsmIOznwENimrR8Cz3jtz\nQJmshPGmEbrpkKaJ7/DJO5EuMKFF6jYKjKiORugFKfU=\n-----END CERTIFICATE-----'
\set paypal_sdk_body '{"id":"WH-2MW4820926242972J-6SG447389E205703U","event_version":"1.0","create_time":"2017-03-30T20:04:05.613Z","resource_type":"plan","event_type":"BILLING.PLAN.CREATED","summary":"A billing plan was created","resource":{"merchant_preferences":{"setup_fee":{"currency":"USD","value":"1"},"return_url":"https://www.mta.org/wp-content/plugins/AMS/api/Paypal/paypal/rest-api-sdk-php/sample/billing/ExecuteAgreement.php?success=true","cancel_url":"https://www.mta.org/wp-content/plugins/AMS/api/Paypal/paypal/rest-api-sdk-php/sample/billing/ExecuteAgreement.php?success=false","auto_bill_amount":"YES","initial_fail_amount_action":"CONTINUE","max_fail_attempts":"0"},"update_time":"2017-03-30T20:04:05.587Z","create_time":"2017-03-30T20:04:05.587Z","name":"T-Shirt of the Month Club Plan","description":"Template creation.","links":[{"href":"api.sandbox.paypal.com/v1/payments/billing-plans/P-2U911356NH683973BEDIWKUY","rel":"self","method":"GET"}],"payment_definitions":[{"name":"Regular Payments","type":"REGULAR","frequency":"Month","frequency_interval":"2","amount":{"currency":"USD","value":"100"},"cycles":"12","charge_models":[{"type":"SHIPPING","amount":{"currency":"USD","value":"10"},"id":"CHM-6H655806YS685182XEDIWKUY"}],"id":"PD-5N450756VM995270VEDIWKUY"}],"id":"P-2U911356NH683973BEDIWKUY","state":"CREATED","type":"FIXED"},"links":[{"href":"https://api.sandbox.paypal.com/v1/notifications/webhooks-events/WH-2MW4820926242972J-6SG447389E205703U","rel":"self","method":"GET"},{"href":"https://api.sandbox.paypal.com/v1/notifications/webhooks-events/WH-2MW4820926242972J-6SG447389E205703U/resend","rel":"resend","method":"POST"}]}'

-- Then deliveries of a test authority made with the openssl command line
-- (test/vectors/make_paypal_vectors.pl), independently of idem: its
-- certificates are valid from 2024 to 2124, one from 2020 to 2021.
-- generated by test/vectors/make_paypal_vectors.pl; do not edit by hand
\set paypal_root '-----BEGIN CERTIFICATE-----\nMIIDSDCCAjCgAwIBAgIBATANBgkqhkiG9w0BAQsFADA0MRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHjAcBgNVBAMMFWlkZW0gdGVzdCBQYXlQYWwgcm9vdDAgFw0yNDAxMDEw\nMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowNDESMBAGA1UECgwJaWRlbSB0ZXN0MR4w\nHAYDVQQDDBVpZGVtIHRlc3QgUGF5UGFsIHJvb3QwggEiMA0GCSqGSIb3DQEBAQUA\nA4IBDwAwggEKAoIBAQCqxxeRuvfJ66fY2PJ+aoQX2ZBF/2utryuNMlmwl6LachUw\nrc1gHD5V1TEVMYDogDsfsiaMi4nSksX2dBWkHhMySDJhNaDPLZ12fGyafW+DdV8C\nPeoNwgGVeUGC0RC2PS9DCKFlAy2BP4si53MoEw5Wmo3DE4veH9KEGsq7kYVNIg4J\nAvVg2Nle4okuJLddVhsnbiLzSSxVF8AQoiZzqkIFnRcY+H3pCb1T7JZ4hYr5u2T8\nDO6ZbYcjznEyVmcHKmQ2KuAxUXVqz3jthyUJtYWzGqS6j7DCtUYyGIcmOva1mmKD\n75TQTZ3s+o7lZcSNuoGK43nnV4j5345+J8Z5Jav3AgMBAAGjYzBhMA8GA1UdEwEB\n/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMB0GA1UdDgQWBBTpo1MUzn7AhamhTzfN\n9gCXLUZg9zAfBgNVHSMEGDAWgBTpo1MUzn7AhamhTzfN9gCXLUZg9zANBgkqhkiG\n9w0BAQsFAAOCAQEALgo6YgZg/I59qqHekuJ4QNECtM0fpNU6IDptgj8YFbYMhL1h\nP/rOfveB3v6utrjrJUtwfxC3LSpewIJ4GxG1HUaZeDlHmadrw3jT41Flp6ZIzOrQ\nzdk/EsXi5jli8FKEu6F9mMO+lCywcpTuBxQy7CDWKz1C9zsaaYZk647t5+zwmidE\nVSmgsg7FQYljqPQH7JE8+liMzhaQOQdrzkdftzhVgOJlKEaBpIcAdZA5o3AATIZn\nodb3Af/KXq5wGRHJRYzIfQHQZgjXZ9zct/b8nSLOzwuH0syb628h9Y34xUPG6r7/\n45aXNnCrqTwbs7Gr1rKTlfB15hY4DeDA7B7qvQ==\n-----END CERTIFICATE-----\n'
\set paypal_middle '-----BEGIN CERTIFICATE-----\nMIIDRjCCAi6gAwIBAgIBAjANBgkqhkiG9w0BAQsFADA0MRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHjAcBgNVBAMMFWlkZW0gdGVzdCBQYXlQYWwgcm9vdDAgFw0yNDAxMDEw\nMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowMjESMBAGA1UECgwJaWRlbSB0ZXN0MRww\nGgYDVQQDDBNpZGVtIHRlc3QgUGF5UGFsIENBMIIBIjANBgkqhkiG9w0BAQEFAAOC\nAQ8AMIIBCgKCAQEA3Be5wnSonshwP62CVZ6n8w5qe/daoKgguOrRCtGpdOFNp4zb\nHhxortbknX3bw1ZQLv9sfYztFPBz3BGTG61uQ0Wz2b0trzrckLTNaCLc9a/4ZF2+\neG0OjUi/ZnlpiMBg0wFCPO/8QPBxPuqak1Slj0XIsfr9ZYpVOLg34M51u7htIrpI\n/01T1C/puBhjDyP/6pS/bEf9NBM35J7zyZdZUYHXOihJ+i15SZj6+p7HNY2yReW9\ns2GS+i6zWcrG3AFSHQzCuLSK4N2gA+qQGGWo9QOo9Y10JHu4vu4qW5Mr5fz3Wc9c\nuEL2FuSXStmsxsrNYRxRSutoX9ChcgWKGb/brQIDAQABo2MwYTAPBgNVHRMBAf8E\nBTADAQH/MA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQUZOkvWWropxIAZX3dKCSP\nbYG/cxcwHwYDVR0jBBgwFoAU6aNTFM5+wIWpoU83zfYAly1GYPcwDQYJKoZIhvcN\nAQELBQADggEBAIry+XFKbEwl8m/ssj4HIUEizl9xWxe+V5h7XJvPqvFRwyE9RjjM\nCWE9jg0wuRamKQ+ZCE/pTfoXmW7qMx7GMPr7zBUn4/IIcuzzyFfDmLvPVphy6J1z\nHeMGSoiJNgajQX3WRMvDg+o42KzgoWt1cCTckL1j5BOywCeT3R3ltOvwXfSM+im0\nQHTiTbKQ0bJ9d5YwSpg3Y5x/K6TGWOjUQNA33eSWvaYQDXfU06wGt8uqgGco42zn\nnqe6plrOwKyLWhUpu7+yoM5iw2XrYYNIkArog35AWKa6mPXmdZg7Av49oPf1XNkT\nVj+gaTZyhYKvwnG4n+sABqcVqO4yDnYwJtc=\n-----END CERTIFICATE-----\n'
\set paypal_signer '-----BEGIN CERTIFICATE-----\nMIIDSzCCAjOgAwIBAgIBAzANBgkqhkiG9w0BAQsFADAyMRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHDAaBgNVBAMME2lkZW0gdGVzdCBQYXlQYWwgQ0EwIBcNMjQwMTAxMDAw\nMDAwWhgPMjEyNDAxMDEwMDAwMDBaMEIxEjAQBgNVBAoMCWlkZW0gdGVzdDEsMCoG\nA1UEAwwjbWVzc2FnZXZlcmlmaWNhdGlvbmNlcnRzLnBheXBhbC5jb20wggEiMA0G\nCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQCf8sjMCY/f4uv4mnim4xS9ljG7KiJ0\n1+C2YgtWJKcOJeknHmo+CZUZg234a26Qt7o0qulqhRbgyN6SvlJ4DmstPVewlb2o\neL/WqEPh8PjZfRYtCOv53aI3A1DmMLtpyo4SaXL5q1ntAZ0n0fM5wfkfTlw05sw9\nssEUhXbyDM7kk3020lWnmUKNh/IyZkFJk5nI5dipzXmMnrk9eXQx72mh5dyMrXPr\nbTYL+qLavORdszTO2YVjXDTNaU4149Gmwhnl/4OAVRhVo0NWa6oW88ASowV9/uHf\nQoKqzU8uC7IRCpADXo+cOwP1Bq3X+5ziHgVIM5wQ1LOQsQPfrNfDz72pAgMBAAGj\nWjBYMAkGA1UdEwQCMAAwCwYDVR0PBAQDAgbAMB0GA1UdDgQWBBSzt5slJFbLm0XN\nyJP26JSFE8+UizAfBgNVHSMEGDAWgBRk6S9ZauinEgBlfd0oJI9tgb9zFzANBgkq\nhkiG9w0BAQsFAAOCAQEAPQfY6gP7pqvT7pJj8GKJtGld9YtXH1tAY0NKLucz+4E8\n5oLIecAzgMagDbtthOMn6wvUKf6f4LtpjLV5VEJw+u2WOD7juoSUp3C4euZq/QJG\n+7N4sd20IZsph2XOvZIXiB7tIa/afb8exF3wdyS2TKPFghr+ARgJv7JIvzfcCBsW\nt2PA6JdZ3pkZalgD1SWLfnYkOUSSqkCGKiGe6zLtNfp+okHtYn5sozd8jnqR3AMV\n1uskHSt+U8ey+3jflX8day4smq41eTHFhNoQh8MlJDB092WE057qjlwqqA5PEHnJ\nuV2AaeZuchztArMyEVtTXKqADeUoC1yzeWoqF4DVYg==\n-----END CERTIFICATE-----\n'
\set paypal_other_root '-----BEGIN CERTIFICATE-----\nMIIDNjCCAh6gAwIBAgIBBDANBgkqhkiG9w0BAQsFADArMRIwEAYDVQQKDAlpZGVt\nIHRlc3QxFTATBgNVBAMMDGFub3RoZXIgcm9vdDAgFw0yNDAxMDEwMDAwMDBaGA8y\nMTI0MDEwMTAwMDAwMFowKzESMBAGA1UECgwJaWRlbSB0ZXN0MRUwEwYDVQQDDAxh\nbm90aGVyIHJvb3QwggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQCiCAyP\nT1g9WaBMxywAOIKxUDTmaeMFfQxRVbNo22dBSU5gxfUdPZiSyBcuBiQEBc0epSNO\nrXxzvMwQqKpKtfV8pfRPhSzBLSg/aoqUVp8+zSnMuv0kI6bf+8sxARNYVNAOTEBO\n9OqQA3NODZFG+KmhxruauEjTwFqLUrcHYgUR6Ccbry5mav2PtwUuNnHgS0gDviQ4\nJsxJauBHn4cfF9nOLkQ7Rx310A1+dU/SkpFqztINsv1F+UjbzKexZKn43rA0O4Gr\noK9Y1TVMLfVn04IhCZ5u9Qv1ufw3tK7b+wqOnkRsg+PzVKmfiQVCQRFpw7hI1wGP\nVEkoognqAjtaIW65AgMBAAGjYzBhMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/\nBAQDAgEGMB0GA1UdDgQWBBSQo2YCQbSmINpdt18/EYmJWOcPYTAfBgNVHSMEGDAW\ngBSQo2YCQbSmINpdt18/EYmJWOcPYTANBgkqhkiG9w0BAQsFAAOCAQEAXE+LnRzM\nwxDXol6uT+KJcOmTTViFgY0Pp4RqkeTTX3vO7DqYKgYzNpawP8Edtn1MM2+3BfwO\ns6CxSDlYkcr8mK4sOvVZwNJuF/Smyfa4nW+SvLNCh18LiW+kK5mCYSFwtkoJ5/5x\nFHV4EFydpHyeSibrozvHPWYyYAKZzHx9sluJ+o76iXBdu/xZ6IItkQ8Bt5RkkB/J\nfGFSwpeSVMV7ADX02/UREp2deFTOFQfF5dlygylMWeu/o2VrisrI80q60ZufzuKk\na1NN9IERntJOQkJw/UE90+P/TL0L9BmRr4CGcrvmC0Cu+xL+mFuTIttM8yiNns9M\nvHGk/3u9H8j4kA==\n-----END CERTIFICATE-----\n'
\set paypal_signer_expired '-----BEGIN CERTIFICATE-----\nMIIDSTCCAjGgAwIBAgIBBzANBgkqhkiG9w0BAQsFADAyMRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHDAaBgNVBAMME2lkZW0gdGVzdCBQYXlQYWwgQ0EwHhcNMjAwMTAxMDAw\nMDAwWhcNMjEwMTAxMDAwMDAwWjBCMRIwEAYDVQQKDAlpZGVtIHRlc3QxLDAqBgNV\nBAMMI21lc3NhZ2V2ZXJpZmljYXRpb25jZXJ0cy5wYXlwYWwuY29tMIIBIjANBgkq\nhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAn/LIzAmP3+Lr+Jp4puMUvZYxuyoidNfg\ntmILViSnDiXpJx5qPgmVGYNt+GtukLe6NKrpaoUW4Mjekr5SeA5rLT1XsJW9qHi/\n1qhD4fD42X0WLQjr+d2iNwNQ5jC7acqOEmly+atZ7QGdJ9HzOcH5H05cNObMPbLB\nFIV28gzO5JN9NtJVp5lCjYfyMmZBSZOZyOXYqc15jJ65PXl0Me9poeXcjK1z6202\nC/qi2rzkXbM0ztmFY1w0zWlONePRpsIZ5f+DgFUYVaNDVmuqFvPAEqMFff7h30KC\nqs1PLguyEQqQA16PnDsD9Qat1/uc4h4FSDOcENSzkLED36zXw8+9qQIDAQABo1ow\nWDAJBgNVHRMEAjAAMAsGA1UdDwQEAwIGwDAdBgNVHQ4EFgQUs7ebJSRWy5tFzciT\n9uiUhRPPlIswHwYDVR0jBBgwFoAUZOkvWWropxIAZX3dKCSPbYG/cxcwDQYJKoZI\nhvcNAQELBQADggEBAFSHwVsafm16hkTqfIPbI3+Sq7pRttLDfqy5GZVPSrF7YvH2\nLv1ChuXnHWPWSvo4vWYCwJxesyFDrt4eCHFdUJyF9oRLrmC5Ku+oqGe9w+9678us\nvZQj8OXL1i2TAgbj1hHvi/OcfoiHOqHWEM9LVP7vWv5oMZxOR2xddN4UBdqNHaGy\n3NtL+jOdr4f8ot3dD+KDEDnTxaCA/z58f0Lb78IHypap3riCn1Fg3rPHPUzZ4dHe\nkKzO+JM7m6GB/hbMVNT+1yKgc7/3qJmYpZM1EVwy2g+p9/DlOh9Ok1EwXg3VnPQG\nCP3a6bZvk4TYKJfSBzC5140ETrtB0/1lSf+okPs=\n-----END CERTIFICATE-----\n'
\set paypal_signer_other_cn '-----BEGIN CERTIFICATE-----\nMIIDTDCCAjSgAwIBAgIBBjANBgkqhkiG9w0BAQsFADAyMRIwEAYDVQQKDAlpZGVt\nIHRlc3QxHDAaBgNVBAMME2lkZW0gdGVzdCBQYXlQYWwgQ0EwIBcNMjQwMTAxMDAw\nMDAwWhgPMjEyNDAxMDEwMDAwMDBaMEMxEjAQBgNVBAoMCWlkZW0gdGVzdDEtMCsG\nA1UEAwwkbWVzc2FnZXZlcmlmaWNhdGlvbmNlcnRzLmV4YW1wbGUuY29tMIIBIjAN\nBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAn/LIzAmP3+Lr+Jp4puMUvZYxuyoi\ndNfgtmILViSnDiXpJx5qPgmVGYNt+GtukLe6NKrpaoUW4Mjekr5SeA5rLT1XsJW9\nqHi/1qhD4fD42X0WLQjr+d2iNwNQ5jC7acqOEmly+atZ7QGdJ9HzOcH5H05cNObM\nPbLBFIV28gzO5JN9NtJVp5lCjYfyMmZBSZOZyOXYqc15jJ65PXl0Me9poeXcjK1z\n6202C/qi2rzkXbM0ztmFY1w0zWlONePRpsIZ5f+DgFUYVaNDVmuqFvPAEqMFff7h\n30KCqs1PLguyEQqQA16PnDsD9Qat1/uc4h4FSDOcENSzkLED36zXw8+9qQIDAQAB\no1owWDAJBgNVHRMEAjAAMAsGA1UdDwQEAwIGwDAdBgNVHQ4EFgQUs7ebJSRWy5tF\nzciT9uiUhRPPlIswHwYDVR0jBBgwFoAUZOkvWWropxIAZX3dKCSPbYG/cxcwDQYJ\nKoZIhvcNAQELBQADggEBAKTwyhkikZSlglYE7aBKJ0eeYp+HaUHdspYbHRmYkxYy\n5tcRRj3UEK2MB7y0kP5chi2kuljetIrzogHMqGMbnk+DL15WSgbjdKInEB9ruYWV\netYHzOJVrndZbpVv1JOa+Qw3v3HmZ3Zc9VE6nfLOk2TNzpRinVKAiGH5YGLVSxgV\nlv8pOKmWn7lpSNTJOUMt7/WwHTUffVVBXKAvyfPGdxg3jrcobjOJ7EqXFENskb42\nR7H+qrdSCblYHXkOwVe89sMxSnt96fOhGwy4bPZfHQsrnu2Xi1HMtyhwMwRoC2t1\n57jFDxOJTJqyPmwDO1AD4tgTcSt7eife+aZy/Q54HkE=\n-----END CERTIFICATE-----\n'
\set paypal_signer_other_root '-----BEGIN CERTIFICATE-----\nMIIDRDCCAiygAwIBAgIBBTANBgkqhkiG9w0BAQsFADArMRIwEAYDVQQKDAlpZGVt\nIHRlc3QxFTATBgNVBAMMDGFub3RoZXIgcm9vdDAgFw0yNDAxMDEwMDAwMDBaGA8y\nMTI0MDEwMTAwMDAwMFowQjESMBAGA1UECgwJaWRlbSB0ZXN0MSwwKgYDVQQDDCNt\nZXNzYWdldmVyaWZpY2F0aW9uY2VydHMucGF5cGFsLmNvbTCCASIwDQYJKoZIhvcN\nAQEBBQADggEPADCCAQoCggEBAJ/yyMwJj9/i6/iaeKbjFL2WMbsqInTX4LZiC1Yk\npw4l6Sceaj4JlRmDbfhrbpC3ujSq6WqFFuDI3pK+UngOay09V7CVvah4v9aoQ+Hw\n+Nl9Fi0I6/ndojcDUOYwu2nKjhJpcvmrWe0BnSfR8znB+R9OXDTmzD2ywRSFdvIM\nzuSTfTbSVaeZQo2H8jJmQUmTmcjl2KnNeYyeuT15dDHvaaHl3Iytc+ttNgv6otq8\n5F2zNM7ZhWNcNM1pTjXj0abCGeX/g4BVGFWjQ1ZrqhbzwBKjBX3+4d9CgqrNTy4L\nshEKkANej5w7A/UGrdf7nOIeBUgznBDUs5CxA9+s18PPvakCAwEAAaNaMFgwCQYD\nVR0TBAIwADALBgNVHQ8EBAMCBsAwHQYDVR0OBBYEFLO3myUkVsubRc3Ik/bolIUT\nz5SLMB8GA1UdIwQYMBaAFJCjZgJBtKYg2l23Xz8RiYlY5w9hMA0GCSqGSIb3DQEB\nCwUAA4IBAQBt5V3mBAMMhbHUR6oTjASLvXyv/XXgHkjFeXB3WM0sqj67wvXNMOeE\nqq39oAZz7LVfMPoA/OrfdMYPr2w61p8JpvkVJ7QaX2Y/bEM+nzoFrJ6QK665n8Vo\nd+nlvU0/00mPekKgzVebgFkLHoNzCeZ3LH+5yon4NCaTDqTO3vw+hrA3oHtbThZU\nWCyn/IqoCLph9uD/AjjTt/myI+7BjnA4U1XIJJcHZ6xoqznhqMf7+S/CQLvfv9JA\n4yZEhzt1DIBBrm1cAWmh4y6/bLMB+s9qPbMKwoFQlxIZtwxNmwjqN58AMVbxfMBf\nHZjUFuwQJgauMenKQIUSg1q+gjBMFMB1\n-----END CERTIFICATE-----\n'
\set paypal_webhook_id '8PT597110X687430LKGECATA'
\set paypal_body '{"id":"WH-58D329510W468432D-8HN650336L201105X","event_version":"1.0","create_time":"2025-01-15T10:30:00.511Z","resource_type":"capture","resource_version":"2.0","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"Payment completed for $ 88.88 USD","resource":{"id":"42311647XV020574X","amount":{"currency_code":"USD","value":"88.88"},"final_capture":true,"status":"COMPLETED","custom_id":"order-20250115-0003"}}'
\set paypal_tid '2f1e9a40-d31c-11ef-9cd2-0242ac120002'
\set paypal_time '2025-01-15T10:30:02Z'
\set paypal_sig 'Y5YrsoXO9qCcPI0LT1NzVVTcH+yhRum9LR/+Kef+cfBOo5qAj3M34kJh7aTEvQWPPCnhprGIVco5Kq6Ev8jz/YmLEGt9Z8bTU7kwSoYKm1Xkj4o2pIdthZ/vXnYGcSUEXk8ear0uX5i8T+p5nWGyW2Th/1PseEt6oa78CMiBkpyEYGLlxWBzMqhEC2GYU3hbfu+Nt9An48B1ldHYfQ3VrNCKuxhqmekt6ftOqrlnIaNCUxWc4DSgHxD9e/GiXOpvHmPNetvuo+1tN0pff8ghvbh1x2eOUxHu3tKPq1EteqkYgZtm08XH3g84Kf2GZIe4lqMEM6DZV8rD2QOPNVTqeA=='
\set paypal_sig_other_key 'GiF5XUkNeVSljg3hTh5IbhYOnHWUKf08J9Q92wDqR0e8zbJd2iG6fKryBRLnEU1yuu3BQRtkMEl13h1vTY6Od9upCgHSYvH1WQrcZATgTMUiKcm5MVCsTQDJb3quztQnIEgfXRiu06Xck0EO5S/Sds/azLcVqSECnTrSGHNjGp/H3gRDuveNKdbjcBMe1L9uXzlqiaM7ixaXboRGk2HUIH567Ex8ag9U/mDtLWFsrOD9N85yoY0B3KDcXR2FWBS4/pdhmx0tIlWFTObIIYKXIpxEwAvaPxt8P16itoLzObmhLqB0rUg3vDuHVvIbvOMLioT6yXFNWJkYhpyQcYmDoA=='
\set paypal_sig_signed_crc 'O175dbhw9MRinH6pJQTaRTQDDKcyq82/YzAfBEz0J6BeNteI2MR3pnTWNyHusTzCAFaaIeOYMEO80etGW34Jg+esAnn8jyfS3dAlM7oDdxlytw7uWl+DF9N9IH2PzuXVCq0/jGhnhC7OjSUGCPB3fUu5I4kt1/muRRwBZrhzuAtFcFUxJ8si9zraWj1sGj49JSf1SZGG8uoljeh9gtDplpwOWMjrPL1QLbLuxW+DaP7/QWMsPJFptkTgQ+DZnCqQUVRRgp7pWMk4oWRoISdQBGDTsXDIZhvgUTcbeA+fZroCKhPg/X8LdOgA2+3ZGOf02Y0iAQtuio5WTZ0nHySN8g=='
\set paypal_sig_other_crc 'lC2mKn+suW/jOj6rOt1A2JCaQOkOurDi1UocqSv3cYty0QFY0MnNaV3fbPj0WUmFZkoh3Y8ywdsGTSwH93/ijjUeoCXaMUvsNMZjyYQVJs5Ge4OiDdzj/23XoFclChJD6o4SLbT0wKPZNO6soHzN0L8DQeVe9FT9jTvrHZVAFUaQ2NSUfHECbgjTJBPxPle7wRT5M2yXL1vFCSYPLdNc2+n7BSrwiXqVoARsyKcEmaZJEKVt5dg4U3Bf/x9GjaZtBedgIBexp4uDRYDJnoknNl+r/bNQ+cS5Y4GNJ5PR+yWJpAKVg3Ufncupc3scgMBhVEebzO/8Y0HevtwVlJhsJw=='
\set paypal_time_early '2023-06-01T00:00:00Z'
\set paypal_sig_early 'MVm4weNUQdb0wXvZ5YsNcfZV+t+MNdKRDYk+1uw0DssB6Rww/1IVj88tVpxQijdw3VCGs9hP7UnC/dg08bpkpmJzq7sY3tQlHndqTGwruSmsk38JgvC5V5a/tnI6bXMNEfqDzQQEFmy87U999HgzfVCs+F3hzDvc998Qh4xc/ec9d+xsowbWAMHErJY+lKOvB71aeYE92raE7jZYzHpCa2J08XCXKcwumbbtqtcp8h25d7kOe3mOt8+bu2oBIkpbC+y5WTc6q9QKugId+SNkXE3xLAAeeoQMsc6vRyza3RIeMZm4Y6M5AMuruLUgVRm/7bDjoDRaSz/76gzIe4tc6g=='
\set paypal_time_offset '2025-01-15T11:30:02.250+01:00'
\set paypal_sig_offset 'SYUZRJWWJupqCuoFbavZzKJA/Hkvv/eBAWqMplktdkiPXIoqhnaVPdnYQHwaFh8f3zl7M7OjTBAZyxZPBoX8QHaodrcYuoEvg7T1dNCK5BGu6a9eyR8msUMcYWNATRdH0Vl6Rld9cZ9DiWrDUkTQ71v0Y/Q5ujtJQbRYqcLKCNV2i9q5gnAabDFU1mfWfA7AnO2UpiWHd2VNYftYLAXr8fD5DLeaRTlNCsFOQkPqG8GTKI+djjDIjZNH5oBgv8ZX57TDiov77Bz+/0yysNnVbebv7f2q8agfL7nk2B/0M55wsrDDxl/XlvUqvRm0MjM+dsoNb694Wgo11gL6I9I1EQ=='

-- Run a statement; show its SQLSTATE and message instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
    RETURN SQLSTATE || ': ' || m;
END $$;

-- A secret, and the headers of a delivery as the application passes them
CREATE FUNCTION pg_temp.secret(webhook_id text, subject text, roots text) RETURNS text
LANGUAGE sql AS $$
    SELECT jsonb_build_object('webhook_id', webhook_id, 'subject', subject, 'roots', roots)::text
$$;
CREATE FUNCTION pg_temp.headers(tid text, ts text, sig text, pem text) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('PAYPAL-TRANSMISSION-ID', tid, 'PAYPAL-TRANSMISSION-TIME', ts,
        'PAYPAL-TRANSMISSION-SIG', sig, 'PAYPAL-AUTH-ALGO', 'SHA256withRSA',
        'PAYPAL-CERT-URL', 'https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-test',
        'PAYPAL-CERT-PEM', pem)
$$;
-- s with its byte at offset (from 1) changed in its lowest bit
CREATE FUNCTION pg_temp.flip(s text, at int) RETURNS text LANGUAGE sql AS $$
    SELECT convert_from(set_byte(convert_to(s, 'UTF8'), at - 1,
                                 get_byte(convert_to(s, 'UTF8'), at - 1) # 1), 'UTF8')
$$;

-- PayPal's delivery: headers as sent (the certificate as PAYPAL-CERT-URL
-- served it, no line end after its END line), no tolerance (it is years
-- old)
SELECT pg_temp.secret('96605875FF6516633', 'messageverificationcerts.sandbox.paypal.com',
                      :'paypal_sdk_root' || :'paypal_sdk_middle') AS sdk_secret \gset
SELECT label, idem_webhook_verify('paypal', s, b, h, NULL) AS verified
FROM (VALUES
  ('as sent', :'sdk_secret', :'paypal_sdk_body',
   pg_temp.headers('071f7d20-1584-11e7-abf0-6b62a8a99ac4', '2017-03-30T20:04:05Z',
       'aBjgm5/xljRYu3G64Q0axISrP2xcy7WbW1u4UTCKnQvyprOZ1a1BBmqn2Jdr6ce8E76I3Ti/AL9y4VYSHyGSEaoE6dVQcCDebLbOXLH0fjTAbTc1/rmfdWmsk0DPltW84Y8W8jOHe3CLWDOwg5zmozyt+AceG2x5eOiw7mLSycaEoj/5RG+dOIWXnmWcLEArbG3VFshy0wuhZrKuGa9C/bD4Ku+Y9gK7Bv5I5IuGRVnTGpcFnVG0KxOyJxccLGyBVCIUMY5IZS7LkmJszQ3HZZFDTNihvgJHECSLwLhzUaysIye5G6CbbLdtAmeeb6wiDciEAvr2dFf+SplOR4Lrng==',
       :'paypal_sdk_signer')),
  -- the intermediate sent with the certificate instead of kept in the secret
  ('root only, intermediate sent', pg_temp.secret('96605875FF6516633',
       'messageverificationcerts.sandbox.paypal.com', :'paypal_sdk_root'), :'paypal_sdk_body',
   pg_temp.headers('071f7d20-1584-11e7-abf0-6b62a8a99ac4', '2017-03-30T20:04:05Z',
       'aBjgm5/xljRYu3G64Q0axISrP2xcy7WbW1u4UTCKnQvyprOZ1a1BBmqn2Jdr6ce8E76I3Ti/AL9y4VYSHyGSEaoE6dVQcCDebLbOXLH0fjTAbTc1/rmfdWmsk0DPltW84Y8W8jOHe3CLWDOwg5zmozyt+AceG2x5eOiw7mLSycaEoj/5RG+dOIWXnmWcLEArbG3VFshy0wuhZrKuGa9C/bD4Ku+Y9gK7Bv5I5IuGRVnTGpcFnVG0KxOyJxccLGyBVCIUMY5IZS7LkmJszQ3HZZFDTNihvgJHECSLwLhzUaysIye5G6CbbLdtAmeeb6wiDciEAvr2dFf+SplOR4Lrng==',
       :'paypal_sdk_signer' || E'\n' || :'paypal_sdk_middle')),
  -- all of these are false
  ('the SDK''s test of another webhook id', pg_temp.secret('NotToBeFound',
       'messageverificationcerts.sandbox.paypal.com', :'paypal_sdk_root' || :'paypal_sdk_middle'),
   :'paypal_sdk_body',
   pg_temp.headers('071f7d20-1584-11e7-abf0-6b62a8a99ac4', '2017-03-30T20:04:05Z',
       'aBjgm5/xljRYu3G64Q0axISrP2xcy7WbW1u4UTCKnQvyprOZ1a1BBmqn2Jdr6ce8E76I3Ti/AL9y4VYSHyGSEaoE6dVQcCDebLbOXLH0fjTAbTc1/rmfdWmsk0DPltW84Y8W8jOHe3CLWDOwg5zmozyt+AceG2x5eOiw7mLSycaEoj/5RG+dOIWXnmWcLEArbG3VFshy0wuhZrKuGa9C/bD4Ku+Y9gK7Bv5I5IuGRVnTGpcFnVG0KxOyJxccLGyBVCIUMY5IZS7LkmJszQ3HZZFDTNihvgJHECSLwLhzUaysIye5G6CbbLdtAmeeb6wiDciEAvr2dFf+SplOR4Lrng==',
       :'paypal_sdk_signer')),
  ('the production subject', pg_temp.secret('96605875FF6516633',
       'messageverificationcerts.paypal.com', :'paypal_sdk_root' || :'paypal_sdk_middle'),
   :'paypal_sdk_body',
   pg_temp.headers('071f7d20-1584-11e7-abf0-6b62a8a99ac4', '2017-03-30T20:04:05Z',
       'aBjgm5/xljRYu3G64Q0axISrP2xcy7WbW1u4UTCKnQvyprOZ1a1BBmqn2Jdr6ce8E76I3Ti/AL9y4VYSHyGSEaoE6dVQcCDebLbOXLH0fjTAbTc1/rmfdWmsk0DPltW84Y8W8jOHe3CLWDOwg5zmozyt+AceG2x5eOiw7mLSycaEoj/5RG+dOIWXnmWcLEArbG3VFshy0wuhZrKuGa9C/bD4Ku+Y9gK7Bv5I5IuGRVnTGpcFnVG0KxOyJxccLGyBVCIUMY5IZS7LkmJszQ3HZZFDTNihvgJHECSLwLhzUaysIye5G6CbbLdtAmeeb6wiDciEAvr2dFf+SplOR4Lrng==',
       :'paypal_sdk_signer')),
  ('sent a year later (certificate expired)', :'sdk_secret', :'paypal_sdk_body',
   pg_temp.headers('071f7d20-1584-11e7-abf0-6b62a8a99ac4', '2020-03-30T20:04:05Z',
       'aBjgm5/xljRYu3G64Q0axISrP2xcy7WbW1u4UTCKnQvyprOZ1a1BBmqn2Jdr6ce8E76I3Ti/AL9y4VYSHyGSEaoE6dVQcCDebLbOXLH0fjTAbTc1/rmfdWmsk0DPltW84Y8W8jOHe3CLWDOwg5zmozyt+AceG2x5eOiw7mLSycaEoj/5RG+dOIWXnmWcLEArbG3VFshy0wuhZrKuGa9C/bD4Ku+Y9gK7Bv5I5IuGRVnTGpcFnVG0KxOyJxccLGyBVCIUMY5IZS7LkmJszQ3HZZFDTNihvgJHECSLwLhzUaysIye5G6CbbLdtAmeeb6wiDciEAvr2dFf+SplOR4Lrng==',
       :'paypal_sdk_signer'))
) AS t(label, s, b, h);

--
-- The test authority's deliveries
--
SELECT pg_temp.secret(:'paypal_webhook_id', 'messageverificationcerts.paypal.com',
                      :'paypal_root' || :'paypal_middle') AS secret \gset
SELECT pg_temp.headers(:'paypal_tid', :'paypal_time', :'paypal_sig',
                       :'paypal_signer' || :'paypal_middle') AS hdrs \gset
SELECT label, idem_webhook_verify('paypal', :'secret', b, h, NULL) AS verified
FROM (VALUES
  ('genuine',                                  :'paypal_body', :'hdrs'::jsonb),
  ('intermediate not sent (in the secret)',    :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_signer'::text))),
  ('header names in lower case',               :'paypal_body', (SELECT jsonb_object_agg(lower(k), v) FROM jsonb_each(:'hdrs') e(k, v))),
  ('no PAYPAL-CERT-URL (not read)',            :'paypal_body', :'hdrs'::jsonb - 'PAYPAL-CERT-URL'),
  ('time with an offset and a fraction',       :'paypal_body', pg_temp.headers(:'paypal_tid', :'paypal_time_offset', :'paypal_sig_offset', :'paypal_signer' || :'paypal_middle')),
  -- all of these are false
  ('certificate of another root',              :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_signer_other_root'::text))),
  ('another root sent along',                  :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_signer_other_root' || :'paypal_other_root'))),
  ('certificate of another subject',           :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_signer_other_cn' || :'paypal_middle'))),
  ('certificate expired (2021)',               :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_signer_expired' || :'paypal_middle'))),
  ('sent before the certificate was valid',    :'paypal_body', pg_temp.headers(:'paypal_tid', :'paypal_time_early', :'paypal_sig_early', :'paypal_signer' || :'paypal_middle')),
  ('the intermediate as the signer',           :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_middle'::text))),
  ('the root as the signer',                   :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_root'::text))),
  ('signed by another key',                    :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-SIG}', to_jsonb(:'paypal_sig_other_key'::text))),
  ('the CRC-32 signed as a signed number',     :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-SIG}', to_jsonb(:'paypal_sig_signed_crc'::text))),
  ('another body''s CRC-32 signed',            :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-SIG}', to_jsonb(:'paypal_sig_other_crc'::text))),
  ('one bit of the body',                      pg_temp.flip(:'paypal_body', 120), :'hdrs'::jsonb),
  ('a space after the body',                   :'paypal_body' || ' ', :'hdrs'::jsonb),
  ('one bit of the transmission id',           :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-ID}', to_jsonb(pg_temp.flip(:'paypal_tid', 5)))),
  ('one bit of the transmission time',         :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-TIME}', to_jsonb(pg_temp.flip(:'paypal_time', 19)))),
  ('one bit of the signature',                 :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-SIG}', to_jsonb(pg_temp.flip(:'paypal_sig', 30)))),
  ('SHA1withRSA named',                        :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-AUTH-ALGO}', '"SHA1withRSA"')),
  ('sha256withRSA named',                      :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-AUTH-ALGO}', '"sha256withRSA"')),
  ('no PAYPAL-TRANSMISSION-ID',                :'paypal_body', :'hdrs'::jsonb - 'PAYPAL-TRANSMISSION-ID'),
  ('no PAYPAL-TRANSMISSION-TIME',              :'paypal_body', :'hdrs'::jsonb - 'PAYPAL-TRANSMISSION-TIME'),
  ('no PAYPAL-TRANSMISSION-SIG',               :'paypal_body', :'hdrs'::jsonb - 'PAYPAL-TRANSMISSION-SIG'),
  ('no PAYPAL-AUTH-ALGO',                      :'paypal_body', :'hdrs'::jsonb - 'PAYPAL-AUTH-ALGO'),
  ('no PAYPAL-CERT-PEM',                       :'paypal_body', :'hdrs'::jsonb - 'PAYPAL-CERT-PEM'),
  ('PAYPAL-CERT-PEM garbage',                  :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', '"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"')),
  ('PAYPAL-CERT-PEM truncated',                :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(left(:'paypal_signer', 400)))),
  ('PAYPAL-CERT-PEM empty',                    :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', '""')),
  ('PAYPAL-CERT-PEM a public key',             :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', '"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n"')),
  ('five certificates sent',                   :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-CERT-PEM}', to_jsonb(:'paypal_signer' || repeat(:'paypal_middle', 4)))),
  ('transmission id empty',                    :'paypal_body', pg_temp.headers('', :'paypal_time', :'paypal_sig', :'paypal_signer')),
  ('transmission time not ISO 8601',           :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-TIME}', '"1736937002"')),
  ('a header twice (in two cases)',            :'paypal_body', :'hdrs'::jsonb || jsonb_build_object('paypal-transmission-id', :'paypal_tid')),
  ('a header not a string',                    :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-ID}', '42')),
  ('signature not base64',                     :'paypal_body', jsonb_set(:'hdrs', '{PAYPAL-TRANSMISSION-SIG}', '"not base64!"')),
  ('empty body',                               '', :'hdrs'::jsonb),
  ('headers not an object',                    :'paypal_body', '[]'::jsonb)
) AS t(label, b, h);

-- the secret: its webhook id and subject (ASCII case aside) are checked,
-- its roots may be in any order, text between them ignored
SELECT label, idem_webhook_verify('paypal', s, :'paypal_body', :'hdrs', NULL) AS verified
FROM (VALUES
  ('as made',                     :'secret'),
  ('subject in capitals',         pg_temp.secret(:'paypal_webhook_id', 'MessageVerificationCerts.PayPal.com', :'paypal_root' || :'paypal_middle')),
  ('root only',                   pg_temp.secret(:'paypal_webhook_id', 'messageverificationcerts.paypal.com', :'paypal_root')),
  ('intermediate first, text',    pg_temp.secret(:'paypal_webhook_id', 'messageverificationcerts.paypal.com', :'paypal_middle' || E'PayPal\n' || :'paypal_root')),
  ('another root too',            pg_temp.secret(:'paypal_webhook_id', 'messageverificationcerts.paypal.com', :'paypal_other_root' || :'paypal_root')),
  -- all of these are false
  ('another webhook id',          pg_temp.secret('8PT597110X687430LKGECATB', 'messageverificationcerts.paypal.com', :'paypal_root')),
  ('webhook id in lower case',    pg_temp.secret(lower(:'paypal_webhook_id'), 'messageverificationcerts.paypal.com', :'paypal_root')),
  ('the sandbox subject',         pg_temp.secret(:'paypal_webhook_id', 'messageverificationcerts.sandbox.paypal.com', :'paypal_root')),
  ('a subject that ends alike',   pg_temp.secret(:'paypal_webhook_id', 'verificationcerts.paypal.com', :'paypal_root')),
  ('another root only',           pg_temp.secret(:'paypal_webhook_id', 'messageverificationcerts.paypal.com', :'paypal_other_root'))
) AS t(label, s);

-- the tolerance applies to the transmission time: years ago
SELECT idem_webhook_verify('paypal', :'secret', :'paypal_body', :'hdrs') AS within_5_minutes,
       idem_webhook_verify('paypal', :'secret', :'paypal_body', :'hdrs', '100 years') AS within_100_years;
-- the same certificate again (from the cache of chains): its dates still
-- count, at each delivery's time
SELECT idem_webhook_verify('paypal', :'secret', :'paypal_body', :'hdrs', NULL) AS again,
       idem_webhook_verify('paypal', :'secret', :'paypal_body',
           pg_temp.headers(:'paypal_tid', :'paypal_time_early', :'paypal_sig_early',
                           :'paypal_signer' || :'paypal_middle'), NULL) AS early_again;

-- Secrets that are not a PayPal configuration: 22023 before the request is
-- read (NULL payload and headers), the secret never quoted
SELECT label, pg_temp.err(format('SELECT idem_webhook_verify(%L, %L, NULL, NULL)', 'paypal', s)) AS error
FROM (VALUES
  ('not JSON',                    'topsecret'),
  ('an array',                    '["8PT597110X687430LKGECATA"]'),
  ('no webhook_id',               jsonb_build_object('subject', 'messageverificationcerts.paypal.com', 'roots', :'paypal_root')::text),
  ('no subject',                  jsonb_build_object('webhook_id', 'W', 'roots', :'paypal_root')::text),
  ('no roots',                    jsonb_build_object('webhook_id', 'W', 'subject', 'messageverificationcerts.paypal.com')::text),
  ('a misspelt member',           jsonb_build_object('webhookid', 'W', 'webhook_id', 'W', 'subject', 'messageverificationcerts.paypal.com', 'roots', :'paypal_root')::text),
  ('a member twice',              '{"webhook_id": "W", "webhook_id": "W", "subject": "s", "roots": ""}'),
  ('a member not a string',       jsonb_build_object('webhook_id', 42, 'subject', 'messageverificationcerts.paypal.com', 'roots', :'paypal_root')::text),
  ('webhook_id empty',            pg_temp.secret('', 'messageverificationcerts.paypal.com', :'paypal_root')),
  ('webhook_id with a space',     pg_temp.secret('8PT597110X687430LKGECATA ', 'messageverificationcerts.paypal.com', :'paypal_root')),
  ('webhook_id with a bar',       pg_temp.secret('8PT5|97110X', 'messageverificationcerts.paypal.com', :'paypal_root')),
  ('subject a DN',                pg_temp.secret('W', 'CN=messageverificationcerts.paypal.com', :'paypal_root')),
  ('subject empty',               pg_temp.secret('W', '', :'paypal_root')),
  ('roots empty',                 pg_temp.secret('W', 'messageverificationcerts.paypal.com', '')),
  ('roots garbage',               pg_temp.secret('W', 'messageverificationcerts.paypal.com', E'-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n')),
  ('roots a public key',          pg_temp.secret('W', 'messageverificationcerts.paypal.com', E'-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n')),
  ('no self-signed root',         pg_temp.secret('W', 'messageverificationcerts.paypal.com', :'paypal_middle')),
  ('the signer as a root',        pg_temp.secret('W', 'messageverificationcerts.paypal.com', :'paypal_signer'))
) AS t(label, s);
